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
    assert (claims(tmp_path).verdict == "not run").sum() == 5                 # no theory, realism, DIAL, ablation or naive-dose tables: named, not guessed

def _by_seed(naive, oracle):
    return pd.DataFrame([dict(method=m, task="math-chat", train_seed=s, score=v) for m, vs in
                         {"Naive Interactive": naive, "Oracle": oracle}.items() for s, v in enumerate(vs)])

@pytest.mark.parametrize("regret_holds, naive, ask, want", [
    (True, [60.0, 62.0, 61.0], 0.9, "reproduced"),                                            # every measured precondition holds
    (False, [60.0, 62.0, 61.0], 0.9, "untestable here (failed: (a) regret transfer)"),
    (True, [72.0, 71.0, 70.0], 0.9, "untestable here (failed: (b) naive training costs on the real user)"),   # Naive ≈ Oracle
    (False, [60.0, 62.0, 61.0], 0.65, "untestable here (failed: (a) regret transfer; (d) headroom)"),
])
def test_a_failed_precondition_makes_the_claim_untestable(tmp_path, regret_holds, naive, ask, want):
    "The same seeds (+5, +6, +7: reproduced by the interval rule) in worlds whose checks hold or fail."
    m, lo, hi = seed_interval([5.0, 6.0, 7.0])
    pd.DataFrame([dict(comparison="Calibrated Interactive − Naive Interactive", task="math-chat", diff=m, ci_low=lo, ci_high=hi,
                       half_width=(hi - lo) / 2, seeds=3, per_seed="+5.0, +6.0, +7.0", paper_effect=np.nan, seeds_for_paper_effect=None)]
                 ).to_csv(tmp_path / "table2_seed_paired.csv", index=False)
    _by_seed(naive, [70.0, 71.0, 73.0]).to_csv(tmp_path / "table2_by_seed.csv", index=False)
    pd.DataFrame([dict(task="math-chat", perfect_asker=ask)]).to_csv(tmp_path / "base_policy_checks.csv", index=False)
    pd.DataFrame([dict(task="math-chat", naive_optimal="never asks", best_real="always asks", regret=30.0 if regret_holds else 0.0,
                       regret_low=20.0 if regret_holds else 0.0, regret_high=40.0 if regret_holds else 0.0, holds=regret_holds)]
                 ).to_csv(tmp_path / "regret_transfer.csv", index=False)
    row = claims(tmp_path).set_index("evidence").loc["Calibrated Interactive − Naive Interactive, math-chat (×100)"]
    assert row.verdict == want
    assert "(c) the calibrated simulator is closer where training looks: `calibration_on_policy` not written by this run — not measured" in row.precondition
    assert row.holm.startswith("p ") and "Holm" in row.holm

@pytest.mark.parametrize("gaps, holds", [([0.10, 0.11, 0.09], "holds"), ([0.05, 0.35, 0.10], "fails")])
def test_the_on_policy_precondition_needs_both_intervals_below_zero(tmp_path, gaps, holds):
    "(c) on three policies: the Phase I simulator's return gap below the naive one's on each, or only on average (0.167 vs 0.2)."
    pd.DataFrame([dict(task="math-chat", policy=p, train_seed=0, user=u, role="simulator", delta_mean=d, J_gap=g)
                  for p, gs in zip(("base", "Naive Interactive", "Oracle"), gaps) for u, d, g in (("naive-simulator", 0.4, 0.2), ("sft-simulator", 0.2, gs))]
                 ).to_csv(tmp_path / "calibration_on_policy.csv", index=False)
    m, lo, hi = seed_interval([5.0, 6.0, 7.0])
    pd.DataFrame([dict(comparison="Calibrated Interactive − Naive Interactive", task="math-chat", diff=m, ci_low=lo, ci_high=hi,
                       half_width=(hi - lo) / 2, seeds=3, per_seed="+5.0, +6.0, +7.0", paper_effect=np.nan, seeds_for_paper_effect=None)]
                 ).to_csv(tmp_path / "table2_seed_paired.csv", index=False)
    row = claims(tmp_path).set_index("evidence").loc["Calibrated Interactive − Naive Interactive, math-chat (×100)"]
    assert f"(both intervals must lie below 0) — {holds}" in row.precondition
    assert row.verdict == ("reproduced" if holds == "holds" else "untestable here (failed: (c) the calibrated simulator is closer where training looks)")

def _dial_tables(d, start_low, gain_low, leak_before):
    "07's tables for a DIAL run: every measure fell beyond chance, from a start told apart at `start_low`, refined with gains above `gain_low`."
    pd.DataFrame([dict(task=t, simulator=s, fresh_accuracy=start_low + 0.05, fresh_acc_low=start_low, fresh_acc_high=start_low + 0.1,
                       dpo_gain=gain_low + 0.2, dpo_gain_low=gain_low if s != "it1" else np.nan) for t in ("math-chat", "docedit-chat") for s in ("it0", "it1")]
                 ).to_csv(d / "dial_iterations_by_task.csv", index=False)
    pd.DataFrame([dict(measure="disc_accuracy", real=0.5, before=0.85, after=0.6, change_low=-0.3, change_high=-0.2, gap_low=np.nan, gap_high=np.nan),
                  dict(measure="accept_wrong", real=0.0, before=0.6, after=0.1, change_low=-0.6, change_high=-0.4, gap_low=-0.6, gap_high=-0.4),
                  dict(measure="leak", real=0.0, before=leak_before, after=0.0, change_low=-0.06, change_high=-0.01, gap_low=-0.06, gap_high=-0.01)]
                 ).assign(before_name="it0", after_name="it1").to_csv(d / "dial_outcomes.csv", index=False)

@pytest.mark.parametrize("start_low, gain_low, leak_before, want", [
    (0.8, 0.5, 0.05, ("reproduced", "reproduced")),                                   # told apart, moved, room to fall: the interval rule decides
    (0.45, 0.5, 0.05, ("untestable here (failed: DIAL's start can be told from the real user)", "reproduced")),
    (0.8, -0.1, 0.05, ("untestable here (failed: DIAL's DPO moves the simulator where its discriminator points)",) * 2),   # DIAL never acted
    (0.8, 0.5, 0.01, ("reproduced", "untestable here (failed: DIAL's start complies more than the real user)")),          # a leak of 0.01 cannot fall measurably
])
def test_dials_outcomes_are_untestable_where_dial_had_nothing_to_do(tmp_path, start_low, gain_low, leak_before, want):
    _dial_tables(tmp_path, start_low, gain_low, leak_before)
    v = claims(tmp_path).set_index("claim").verdict
    assert (v["DIAL makes the simulator harder to tell from real users"], v["DIAL's simulator is no more compliant than its start"]) == want

@pytest.mark.parametrize("regret_holds, control, want", [
    (True, "0.400 ± 0.030", "reproduced"), (False, "0.400 ± 0.030", "untestable here (failed: (a) regret transfer)"),
    (True, "0.040 ± 0.030", "untestable here (failed: the ablation's budget can move a policy)"),   # the positive control did not move
])
def test_the_artifact_claim_needs_an_exploit_and_a_budget_that_moves_a_policy(tmp_path, regret_holds, control, want):
    pd.DataFrame([dict(simulator="real", reward_path="judge", seeds=3, drop="0.000 ± 0.000", probe_leak_rewarded="0 ± 0", probe_accept_wrong="0 ± 0"),
                  dict(simulator="mix", reward_path="judge", seeds=3, drop="0.300 ± 0.030", probe_leak_rewarded="0.6 ± 0.1", probe_accept_wrong="0 ± 0"),
                  dict(simulator="mix", reward_path="verdict", seeds=3, drop=control, probe_leak_rewarded="0.2 ± 0.1", probe_accept_wrong="0.7 ± 0.1")]
                 ).to_csv(tmp_path / "ablation.csv", index=False)
    pd.DataFrame([dict(task=t, naive_optimal="waits for leaks", best_real="always asks", regret=30.0 * regret_holds, regret_low=20.0 * regret_holds,
                       regret_high=40.0 * regret_holds, holds=regret_holds) for t in ("math-chat", "docedit-chat")]).to_csv(tmp_path / "regret_transfer.csv", index=False)
    row = claims(tmp_path, ablation_tasks=["math-chat"]).set_index("claim").loc["simulator artifacts cause reward hacking"]
    assert row.verdict == want and "docedit-chat" not in row.precondition      # the ablation's own tasks only

def test_the_interval_over_worlds_takes_the_world_as_its_unit():
    # tolerances: means of a few exact numbers in float64; pytest.approx's default 1e-6, and 1e-4 where t(1) = 12.7062 is printed to 4 decimals
    "Two worlds whose seeds agree inside each but not with each other: one world's interval is sure, the pooled one is not."
    from calirl.stats import world_interval, world_spread
    d = [[5.0, 6.0, 7.0], [-2.0, -1.0, 0.0]]
    assert seed_interval(d[0])[1] > 0                                   # conditional on the first world: decided
    m, lo, hi = world_interval(d)
    assert m == pytest.approx(2.5) and lo < 0 < hi
    assert hi - lo == pytest.approx(2 * 12.7062 * 3.5, rel=1e-4)     # 2 · t(1) · sd(6, −1) / √2 = 2 · 12.71 · 3.5
    sp = world_spread(d)
    assert sp["within_sd"] == pytest.approx(1.0) and sp["between_sd"] == pytest.approx(np.sqrt(24.5 - 1 / 3))

def test_a_redrawn_worlds_table2_is_pooled_by_the_report(tmp_path):
    "`table2_over_worlds` reads each world's `table2_by_seed` as 10_evaluate writes it, and the report shows the section."
    from calirl.report import run_report, table2_over_worlds
    worlds = {}
    for w, lift in (("tiny", 0.10), ("tiny-world-1", -0.05)):
        R = _results({"Naive Interactive": {0: 0.0, 1: 0.01, 2: -0.01}, "Calibrated Interactive": {s: lift for s in range(3)}})
        worlds[w] = scores_by_seed(R)
    W = table2_over_worlds(worlds, ["math-chat", "docedit-chat"]).set_index(["comparison", "task"])
    r = W.loc[("Calibrated Interactive − Naive Interactive", "math-chat")]
    assert (r.worlds, r.seeds) == (2, 6) and r.per_world.startswith("tiny +10") and "; tiny-world-1 -" in r.per_world
    assert r.one_world_low > 0 and r.ci_low < 0 < r.ci_high             # the first world alone says yes; two worlds do not
    W.reset_index().to_csv(tmp_path / "table2_over_worlds.csv", index=False)
    page = run_report("tiny", tmp_path / "run", tmp_path, tmp_path, keys={"G": 8})
    assert "## Which differences survive another world" in page and "over 2 worlds" in page
