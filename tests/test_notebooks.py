"""Every notebook of the pipeline runs as a test through nbdev (cells flagged notest/slow/gpu skipped),
in run order, each in a fresh interpreter (like a fresh kernel), with its parameters cell's defaults."""
import subprocess, sys
import pytest
from conftest import ROOT
from calirl.pipeline import list_notebooks

NOTEBOOKS = [p.name for p in list_notebooks(ROOT)]
RUN = ("import sys\nfrom nbdev.test import test_nb\n"
       "ok, secs = test_nb(sys.argv[1], skip_flags=['notest', 'slow', 'gpu'])\n"
       "print(f'{secs:.1f} s'); sys.exit(0 if ok else 1)")

@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_notebook(nb, nb_project):
    r = subprocess.run([sys.executable, "-c", RUN, nb], cwd=nb_project / "nbs", capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{nb} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
