"""Calibration on-policy (10a_calibration_on_policy): on constructed cases whose answers are known, with scripted
assistants in the role of the policy — the real user as its own simulator reads δ̂ = 0 and a return gap of 0 exactly,
the naive simulator accepts a guesser's wrong answers, an assistant that never answers wrong is never accepted wrong,
a real user without common random numbers is refused, and δ̂ and the gap are `08_realism`'s own numbers."""
# tolerances: none; δ̂ and J are compared exactly (the same samples and sums in the same order), the rest are counts
import numpy as np
import pytest
from calirl.tasks import TASKS, tiny_items
from calirl.users import ScriptedAssistant, artifact_simulator, scripted_human
from calirl.realism import TextAssistant, realism_report
from calirl import calibration as C

TURNS = 3                                                         # assistant turns per conversation

@pytest.fixture(scope="module")
def items(): return [it for t in TASKS for it in tiny_items(t, "validation", 40, seed=3)]

GUESSER = TextAssistant(ScriptedAssistant(ask_rate=0.0, slip=0.3), name="guesser")      # never asks, often wrong
CAREFUL = TextAssistant(ScriptedAssistant(ask_rate=1.0, slip=0.0), name="careful")      # asks until it knows, never slips

@pytest.fixture(scope="module")
def guessed(items):
    users = {"itself": scripted_human(), "artifact-simulator": artifact_simulator()}
    return C.on_policy_rows(users, items, scripted_human(), GUESSER, TURNS, 8, seed=3).set_index("user")

def test_the_real_user_as_its_own_simulator_reads_zero(guessed):
    deltas = [f"delta_{t}" for t in range(TURNS)]
    assert list(guessed.index) == ["scripted-human", "itself", "artifact-simulator"]          # the noise floor first
    assert guessed.loc["itself", deltas + ["delta_mean", "J_gap"]].tolist() == [0.0] * (TURNS + 2)
    assert guessed.loc["itself", "J_sim"] == guessed.loc["itself", "J_real"]
    assert guessed.loc["scripted-human", "role"] == "real (re-run)" and (guessed[deltas].to_numpy() >= 0).all()

def test_the_naive_simulator_accepts_a_guessers_wrong_answers_and_the_real_user_never_does(guessed):
    a, h = guessed.loc["artifact-simulator"], guessed.loc["scripted-human"]
    assert a.answered_wrong > 0.5 and 0.3 < a.accept_wrong <= a.answered_wrong, a
    assert h.answered_wrong > 0.5 and h.accept_wrong == 0.0, h
    assert (guessed.accept_wrong == guessed.accept_wrong_probe).all()          # scripted users: text and label readings agree
    assert a.delta_mean > 2 * h.delta_mean and a.J_gap > h.J_gap            # far above the noise floor, and a larger gap

def test_an_assistant_that_never_answers_wrong_is_never_accepted_wrong(items):
    r = C.on_policy_rows({"artifact-simulator": artifact_simulator()}, items, scripted_human(), CAREFUL, TURNS, 8, seed=3)
    assert (r[["accept_wrong", "accept_wrong_probe", "answered_wrong"]].to_numpy() == 0).all(), r

def test_accepted_wrong_reads_only_an_acceptance_that_ends_on_a_wrong_answer(items):
    it = next(i for i in items if i.task == "math-chat")
    op = {"role": "user", "content": "can you help ?"}
    wrong, right = ({"role": "assistant", "content": f"the answer is {int(it.y_star) + d}"} for d in (1, 0))
    yes, no = {"role": "user", "content": "thanks ! [[TERMINATE CHAT]]"}, {"role": "user", "content": "no , wrong ."}
    assert C.accepted_wrong(it, [op, wrong, yes])
    assert not any(C.accepted_wrong(it, m) for m in ([op, right, yes], [op, wrong, no], [op, wrong, yes, wrong], [op], []))
    assert C.answered_wrong(it, [op, wrong, no, right, yes]) and not C.answered_wrong(it, [op, right, yes])

class Drifting:
    "The real user drawing every sample from a seed of its own: no common random numbers."
    name = "drifting"
    def __init__(self): self.inner, self.k = scripted_human(), 0
    def respond(self, items, chats, states):
        self.k += 1
        for s in states: s["seed"] = f"{s['seed']}|{self.k}"
        return self.inner.respond(items, chats, states)

def test_a_real_user_without_common_random_numbers_is_refused(items):
    with pytest.raises(RuntimeError, match="not 0"): C.on_policy_rows({}, items[:12], Drifting(), GUESSER, TURNS, 8, seed=3)

def _embed(texts):
    "Cheap deterministic features standing in for MiniLM (MAUVE is not what this test checks)."
    return np.stack([np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts]).astype(np.float32)

def test_delta_and_gap_are_those_of_08s_report_for_the_same_assistant(items):
    users = {"artifact-simulator": artifact_simulator()}
    mine = C.on_policy_rows(users, items, scripted_human(), GUESSER, TURNS, 8, seed=3, n_hist=30).set_index("user")
    theirs = realism_report(users, items, scripted_human(), TURNS, n_samples=8, seed=3, n_hist=30, assistant=GUESSER, embed=_embed,
                            mauve_seeds=1, log=lambda *a: None).set_index("user")
    cols = [f"delta_{t}" for t in range(TURNS)] + ["delta_mean", "J_gap", "right_reveal", "terminated", "mean_end_turn"]
    for u in ("scripted-human", "artifact-simulator"):
        assert mine.loc[u, cols].astype(float).tolist() == theirs.loc[u, cols].astype(float).tolist(), u
        assert mine.loc[u, "J_sim"] == theirs.loc[u, "J"]
