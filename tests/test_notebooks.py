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


def _tables(d):
    import pandas as pd
    volatile = lambda c: any(w in c.lower() for w in ("second", "time", "elapsed"))
    return {p.name: pd.read_csv(p).pipe(lambda df: df[[c for c in df.columns if not volatile(c)]]) for p in sorted(d.glob("*.csv"))
            if p.stem != "time_profile"}                                  # written by `calirl reproduce` only: timings

def test_same_seed_same_tables(nb_project, smoke_reproduction):
    "The notebooks run by nbdev and by `calirl reproduce` (papermill) with the same profile and seed give identical tables."
    import pandas as pd
    proj, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = _tables(nb_project / "figures" / "smoke"), _tables(proj / "figures" / "smoke")
    assert set(a) == set(b) and len(a) >= 5, (sorted(a), sorted(b))
    for name in a: pd.testing.assert_frame_equal(a[name], b[name], obj=name)
