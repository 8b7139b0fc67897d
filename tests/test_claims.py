"""The claims table's rule reads training seeds: synthetic per-seed results (seeds that agree, that disagree, one
outlier, a single run, a level claim) get the verdict the rule promises, through `claims` as the report calls it."""
import numpy as np
import pandas as pd
import pytest
from calirl.evaluate import scores_by_seed, table2_seed_paired
from calirl.stats import seed_interval
from calirl.report import claims, seed_verdict

def _verdict(per_seed, direction=1):
    _, lo, hi = seed_interval(per_seed)
    return seed_verdict(per_seed, lo, hi, direction)

@pytest.mark.parametrize("per_seed, direction, want", [
    ([5.0, 6.0, 7.0], 1, "reproduced"),                                   # seeds agree
    ([7.0, -3.0, 1.0], 1, "inconclusive (seeds disagree in sign)"),       # seeds disagree
    ([7.0, 0.4, 0.2], 1, "inconclusive"),                                 # one outlier among three positive seeds
    ([-5.0, -6.0, -4.0], 1, "not reproduced"),                            # agree, the other way
    ([12.0], 1, "inconclusive (1 training seed: no interval over training runs)"),
    ([0.5, -0.5, 1.0], 0, "reproduced (seeds disagree in sign)"),         # level
    ([-40.0, -45.0, -42.0], 0, "not reproduced"),
])
def test_seed_verdict(per_seed, direction, want):
    assert _verdict(per_seed, direction) == want

def _results(lift:dict, seeds=(0, 1, 2), items=20, rng=np.random.default_rng(0)) -> pd.DataFrame:
    "Per-conversation results: Base trained once; each method's training seed s scores Base + lift[m][s] on average."
    rows = []
    for m, by_seed in {"Base": {0: 0.0}, **lift}.items():
        for s in (seeds if m != "Base" else (0,)):
            for t in ("math-chat", "docedit-chat"):
                for e in (0, 1):
                    for i in range(items):
                        rows.append(dict(method=m, task=t, train_seed=s, seed=e, item_id=f"{t}-{i}",
                                         score=float(np.clip(0.5 + by_seed[s] + rng.normal(0, 0.02), 0, 1))))
    return pd.DataFrame(rows)

def test_claims_read_seed_level_intervals(tmp_path):
    R = _results({"Static Context": {0: -0.20, 1: -0.22, 2: -0.18},
                  "Naive Interactive": {0: 0.25, 1: 0.20, 2: 0.22},
                  "Calibrated Interactive": {0: 0.32, 1: 0.21, 2: 0.15},      # +7, +1, −7 over Naive: seeds disagree
                  "CollabLLM": {0: 0.01, 1: 0.01, 2: 0.01}})
    R = R[(R.method != "CollabLLM") | (R.train_seed == 0)]                   # CollabLLM trained once
    sp = table2_seed_paired(scores_by_seed(R), ["math-chat", "docedit-chat"],
                            paper={"Base": 82.3, "CollabLLM": 82.3, "Static Context": 85.0, "Naive Interactive": 89.3, "Calibrated Interactive": 91.5})
    sp.to_csv(tmp_path / "table2_seed_paired.csv", index=False)
    v = claims(tmp_path).set_index("evidence").verdict
    key = lambda comp, task="math-chat": next(k for k in v.index if k.startswith(f"{comp}, {task} (×100)"))
    assert v[key("Naive Interactive − Static Context")] == "reproduced"
    assert v[key("Calibrated Interactive − Naive Interactive")] == "inconclusive (seeds disagree in sign)"
    assert v[key("Static Context − Base")] == "not reproduced"
    assert v[key("CollabLLM − Base")].startswith("inconclusive (1 training seed")
    assert (claims(tmp_path).verdict == "not run").sum() == 4                 # no theory, realism, DIAL or ablation tables: named, not guessed
