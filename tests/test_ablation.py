"""The artifact ablation's parts: one knob per artifact, strength 0 = the real user, the reward-path switch, the theory helpers."""
# tolerances: float64 arithmetic on a handful of values ≤ 10 (rounding ≲ 1e-14): math.isclose's and np.allclose's defaults (1e-9 / 1e-8)
import math
import numpy as np
import pandas as pd
import pytest
from calirl.stats import fit_line
from calirl.ablation import (USER_ARTIFACTS, ablation_grid, ablation_reward, artifact_knobs, artifact_rate,
                              ablation_user, artifact_user, most_harmful, simulator_verdict, summarize, verdict_return,
                              with_theory)
from calirl.theory import bound_32_H2
from calirl.tasks import tiny_items
from calirl.users import HUMAN, ScriptedAssistant, scripted_human
from calirl.dialogue import converse

ITEMS = [it for t in ("math-chat", "docedit-chat") for it in tiny_items(t, "train", 150, seed=5)]
ASST = ScriptedAssistant(ask_rate=0.5, slip=0.3)

@pytest.fixture(scope="module")
def human(): return converse(scripted_human(), ASST, ITEMS, H=5, seed=2)

@pytest.mark.parametrize("name", list(USER_ARTIFACTS))
def test_strength_zero_is_the_real_user_and_one_is_the_artifact(name, human):
    ds = {s: converse(artifact_user(name, s), ASST, ITEMS, H=5, seed=2) for s in (0.0, 0.25, 0.5, 1.0)}
    assert [[m["content"] for m in d.messages] for d in ds[0.0]] == [[m["content"] for m in d.messages] for d in human]
    r = {s: artifact_rate(name, d, ITEMS) for s, d in ds.items()}
    assert r[0.0] < r[0.25] < r[0.5] < r[1.0], (name, r)
    assert r[1.0] - r[0.0] > 0.3, (name, r)
    if name != "collapse": assert r[1.0] > 0.95, (name, r)        # the maximum: always

def test_artifact_rates_at_strength_one_and_zero(human):
    assert artifact_rate("leak_hidden", human, ITEMS) == 0 and artifact_rate("accept_wrong", human, ITEMS) == 0
    assert artifact_rate("early_stop", human, ITEMS) == 0
    assert abs(artifact_rate("deflect", human, ITEMS) - HUMAN.deflect) < 0.05     # the real user's own deflection rate

def test_strength_maps_linearly_between_the_real_user_and_the_maximum():
    for name, (knob, k1, fixed) in USER_ARTIFACTS.items():
        k0 = getattr(HUMAN, knob)
        for s in (0.0, 0.3, 0.5, 1.0):
            kn = artifact_knobs(name, s)
            assert math.isclose(getattr(kn, knob), (1 - s) * k0 + s * k1)
            others = {f: getattr(HUMAN, f) for f in HUMAN.__dataclass_fields__ if f != knob and f not in fixed}
            assert all(getattr(kn, f) == v for f, v in others.items()), name      # nothing else moves
    assert artifact_knobs("leak_answer", 0.5).leak_what == "answer" and artifact_knobs("leak_hidden", 0.5).leak_what == "hidden"
    assert artifact_knobs("deflect", 0.0) == HUMAN

@pytest.mark.parametrize("bad", ["sycophancy", "", "Leak_hidden"])
def test_unknown_artifact_names_the_valid_ones(bad):
    with pytest.raises(ValueError, match="valid: leak_hidden, leak_answer, accept_wrong, deflect, collapse, early_stop"):
        artifact_knobs(bad, 0.5)

@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), "0.5", None])
def test_strength_outside_unit_interval_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        artifact_knobs("deflect", bad)

def test_bad_reward_path_and_simulator():
    with pytest.raises(ValueError, match="valid: judge, verdict"): ablation_reward("sim", {})
    with pytest.raises(ValueError, match="valid: real, leak_hidden"): ablation_user("prompted", None, {})
    with pytest.raises(ValueError, match="valid: leak_hidden"): artifact_rate("typos", [], [])

def _chat(*ms): return [{"role": r, "content": c} for r, c in ms]

def test_reward_paths_disagree_exactly_on_accepted_wrong_answers():
    it = tiny_items("math-chat", "eval", 1, seed=0)[0]
    bad = str(int(it.y_star) + 2)
    eps = [(_chat(("user", "q"), ("assistant", f"the answer is {bad}"), ("user", "yes , thanks ! [[TERMINATE CHAT]]")), [["open"], ["accept_wrong"]]),
           (_chat(("user", "q"), ("assistant", f"the answer is {bad}"), ("user", "that is wrong .")), [["open"], ["reject"]]),
           (_chat(("user", "q"), ("assistant", "how many ?"), ("user", "3 more ."), ("assistant", "so ?"), ("user", "ok , and ?"),
                  ("assistant", f"the answer is {it.y_star}"), ("user", "perfect , thank you . [[TERMINATE CHAT]]")),
            [["open"], ["reveal"], ["nudge"], ["accept", "typo"]]),
           (_chat(("user", "q"), ("assistant", f"the answer is {bad}"), ("user", "great , that is right . [[TERMINATE CHAT]]")), [[], ["terminate"]]),
           (_chat(("user", "q"), ("assistant", f"the answer is {bad}"), ("user", "this is not working . [[TERMINATE CHAT]]")), [[], ["terminate"]]),
           (_chat(("user", "q")), [["open"]])]
    items, ids = {it.item_id: it}, [it.item_id] * len(eps)
    msgs, acts = [e[0] for e in eps], [e[1] for e in eps]
    judge = ablation_reward("judge", items)(None, None, ids, msgs, acts)
    verdict = ablation_reward("verdict", items)(None, None, ids, msgs, acts)
    assert judge == [0.0, 0.0, 1.0, 0.0, 0.0, None]
    assert np.allclose(verdict[:5], [1.0, 0.0, 0.8, 1.0, 0.0]) and verdict[5] is None   # 3 turns: 1 − 2 · 0.1
    assert [simulator_verdict(it, m, a) for m, a in zip(msgs, acts)] == [True, False, True, True, False, False]
    assert verdict_return(it, msgs[2], acts[2], turn_cost=0.0) == 1.0

def test_fit_line_and_bound_on_known_cases():
    f = fit_line([0, 1, 2, 4], [0.5, 1.5, 2.5, 4.5])
    assert np.allclose([f["slope"], f["intercept"], f["r"]], [1, 0.5, 1]) and f["n"] == 4
    f = fit_line([0, 1, np.nan, 2], [1, 0, 5, -1])
    assert np.allclose([f["slope"], f["r"]], [-1, -1]) and f["n"] == 3
    assert math.isnan(fit_line([1], [1])["slope"])
    assert math.isclose(bound_32_H2(np.array([1.0, 0.5, 0.25, 0.0]), 2.0), 1.0 * (3 + 1 + 0.25))

def test_with_theory_pairs_drops_by_seed_and_uses_each_simulators_delta():
    df = pd.DataFrame(dict(simulator=["real", "real", "deflect", "deflect", "mix", "sft"], reward_path="judge",
                           strength=[0.0, 0.0, 1.0, 1.0, None, None], seed=[0, 1, 0, 1, 0, 0],
                           success=[0.8, 0.6, 0.5, 0.5, 0.7, 0.1], gap=0.0))
    delta = {"real": [0.1, 0.0, 0.0], ("deflect", 1.0): [1.0, 0.5, 0.0], "mix": [0.2, 0.2, 0.2]}
    out = with_theory(df, delta)
    assert np.allclose(out["drop"], [0.0, 0.0, 0.3, 0.1, 0.1, 0.7])
    assert np.allclose(out["delta_sum"][:5], [0.1, 0.1, 1.5, 1.5, 0.6]) and math.isnan(out["delta_sum"][5])   # unknown δ̂: NaN
    assert np.allclose(out["bound_32"][:5], [0.1, 0.1, 1.25, 1.25, 0.3])
    assert most_harmful(out.assign(simulator=["real", "real", "deflect", "deflect", "mix", "sft"])) == ["deflect"]
    t = summarize(out, ["success", "drop"])
    assert list(t.simulator) == ["real", "deflect", "mix", "sft"] and list(t.seeds) == [2, 2, 1, 1]
    assert t["success"][0] == "0.700 ± 0.100" and t["drop"][1] == "0.200 ± 0.100"

def test_grid_covers_every_artifact_the_mix_on_both_paths_and_the_lm_simulators():
    g = ablation_grid(0.7)
    assert [c["simulator"] for c in g] == ["real", *USER_ARTIFACTS, "mix", "mix", "sft", "dial"]
    assert [c["reward_path"] for c in g if c["simulator"] == "mix"] == ["judge", "verdict"]
    assert all(c["strength"] == 0.7 for c in g if c["simulator"] in USER_ARTIFACTS)
