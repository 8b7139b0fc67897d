"""Every notebook of the pipeline runs as a test, in run order, each in a fresh kernel with the smoke profile's
parameters (which equal its parameters cell's defaults: `test_repo.py`): through one real `calirl reproduce --profile
smoke` (papermill), shared with the other tests that inspect that run. A notebook's cells assert what they demonstrate,
so a notebook passes when every cell ran. Each notebook runs once per test session; running it a second time through
nbdev's test runner only repeated the same cells (the tables it wrote were identical) and took about a third of the
suite's time."""
import pytest
from conftest import ROOT
from calirl.pipeline import list_notebooks, read_state

NOTEBOOKS = [p.stem for p in list_notebooks(ROOT)]

@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_notebook(nb, smoke_reproduction):
    proj, r = smoke_reproduction
    st = read_state(proj / "runs" / "smoke").get(nb)
    assert st and st.get("status") == "ok", (f"{nb}: {st or 'never ran'} (executed copy: runs/smoke/notebooks/{nb}.ipynb)\n"
                                             f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
