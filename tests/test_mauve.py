"""MAUVE (08_realism) gives the same number on a rerun: features are a pure function of each message, the order of the
messages does not matter, and the k-means seed's share of the variance is reported as a std, not hidden in one draw."""
# tolerances: a mean and a std of a few float64 MAUVE scores: pytest.approx's default (1e-6 relative)
import random, subprocess, sys
import numpy as np
import pytest
from calirl.tasks import TASKS, tiny_items
from calirl.users import artifact_simulator, scripted_human
from calirl import realism as R

@pytest.fixture(scope="module")
def texts():
    items = [it for t in TASKS for it in tiny_items(t, "eval", 30, seed=3)]
    return {u.name: R._texts(R.dialogues_with(u, items, 3, seed=3)) for u in (scripted_human(), artifact_simulator())}

def test_a_message_is_embedded_the_same_whatever_its_neighbours():
    short, long = "ok .", "could you tell me the second number and also what the first one was , please ?"
    R._EMBEDDER["vectors"].clear()
    alone = R.minilm_embed([short])
    R._EMBEDDER["vectors"].clear()
    batched = R.minilm_embed([long, short, long + " again"])
    assert batched[1].tobytes() == alone[0].tobytes()       # padding beside a long message used to move it by ~1e-7

def test_mauve_does_not_depend_on_the_order_of_the_messages(texts):
    P, Q = texts["artifact-simulator"], texts["scripted-human"]
    shuffled = [random.Random(s).sample(P, len(P)) for s in range(3)]
    base = R.mauve_score(P, Q)
    assert [R.mauve_score(p, Q[::-1]) for p in shuffled] == [base] * 3

def test_mean_std_over_kmeans_seeds(texts):
    P, Q = texts["artifact-simulator"], texts["scripted-human"]
    runs = R.mauve_runs(P, Q, seeds=(0, 1, 2, 3, 4))
    m, sd = R.mauve_mean_std(P, Q, n_seeds=5)
    assert m == pytest.approx(np.mean(runs)) and sd == pytest.approx(np.std(runs, ddof=1))
    assert len(set(runs)) > 1 and sd > 0                     # the seed matters: that is why the std is reported
    assert all(np.isnan(R.mauve_mean_std(P[:5], Q, n_seeds=3)))

_RERUN = """
import sys, torch
torch.set_num_threads(int(sys.argv[1]))
sys.path.insert(0, sys.argv[2])
from test_mauve import rerun_mauve
print(repr(rerun_mauve()))
"""

def rerun_mauve():
    "MAUVE of the artifact simulator against the scripted human on a few items, as a fresh process computes it."
    items = [it for t in TASKS for it in tiny_items(t, "eval", 12, seed=3)]
    P, Q = (R._texts(R.dialogues_with(u, items, 3, seed=3)) for u in (artifact_simulator(), scripted_human()))
    return R.mauve_mean_std(P, Q, n_seeds=3)

def test_a_rerun_in_a_fresh_process_with_other_threads_gives_the_same_mauve():
    "A fresh process on two threads (its own embeddings, its own k-means) and this one on one thread: the same MAUVE, to the bit."
    import torch
    from pathlib import Path
    p = subprocess.run([sys.executable, "-c", _RERUN, "2", str(Path(__file__).parent)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    R._EMBEDDER["vectors"].clear()                                       # embedded again here, on one thread
    try: here = repr(rerun_mauve())
    finally: torch.set_num_threads(threads)
    assert p.stdout.strip().splitlines()[-1] == here, (p.stdout[-500:], here)
