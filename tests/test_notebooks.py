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


def test_run_records_the_keys_each_notebook_read(smoke_reproduction):
    "Each record lists the profile keys its notebook read; a `-p` on a key only later notebooks read leaves the earlier ones up to date."
    from conftest import calirl
    proj, _ = smoke_reproduction
    st = read_state(proj / "runs" / "smoke")
    reads = {nb: st[nb].get("reads") for nb in NOTEBOOKS}
    assert all(isinstance(r, list) for r in reads.values()), reads
    assert {"grpo_lr", "eps_high", "G", "H"} <= set(reads["09_grpo"]) and reads["02b_prompts"] == [], reads
    assert "grpo_lr" not in reads["06_simulator_sft"] and "sft_lr" in reads["06_simulator_sft"], reads["06_simulator_sft"]
    first = next(nb for nb in NOTEBOOKS if "grpo_lr" in reads[nb])                 # the first notebook that reads the key
    r = calirl("reproduce", "--profile", "smoke", "--dry-run", "-p", "grpo_lr=0.0002", cwd=proj)
    assert r.returncode == 0, r.stderr
    plan = {l.split()[1]: l.split()[2] for l in r.stdout.splitlines() if l.startswith("[")}
    assert all(plan[nb] == "done" for nb in NOTEBOOKS[:NOTEBOOKS.index(first)]), plan
    assert all(plan[nb] == "run" for nb in NOTEBOOKS[NOTEBOOKS.index(first):]), plan
    r = calirl("reproduce", "--profile", "smoke", "--dry-run", cwd=proj)
    assert "0 notebook(s) to run" in r.stdout, r.stdout[-2000:]


def test_a_run_leaves_nothing_in_the_temporary_folder(smoke_reproduction):
    """The run had a temporary folder of its own (`TMPDIR`): every folder its notebooks, trainers and launched processes
    made there (trainers' output folders, a benchmark's models, torch elastic's logs, the kernels' sockets) is gone."""
    proj, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-3000:]
    left = sorted(p.name for p in (proj.parent / "tmp").iterdir())
    assert not left, left
