"""Each user-model behaviour happens at its configured rate (1,000+ conversations per check)."""
import pytest
from calirl.dialogue import converse, has_terminal
from calirl.tasks import tiny_items
from calirl.users import (ARTIFACT, HUMAN, ScriptedAssistant, act_rates, artifact_simulator,
                          outcome_rates, scripted_human)

N = 1000

@pytest.fixture(scope="module", params=["math-chat", "docedit-chat"])
def items(request): return tiny_items(request.param, "train", N, seed=3)

def _openings(user, items):
    out = []
    for it in items:
        st = {"seed": it.item_id}
        out.append((user.respond([it], [[]], [st])[0], st))
    return out

def test_artifact_leaks_at_its_rate(items):
    for leak in (0.2, 0.7):
        ops = _openings(artifact_simulator(leak=leak), items)
        rate = sum("leak_hidden" in t.acts for t, _ in ops) / N
        assert abs(rate - leak) < 0.05, (leak, rate)

def test_human_never_accepts_a_wrong_answer_and_artifact_does_at_its_rate(items):
    asst = ScriptedAssistant(ask_rate=0.2, slip=0.3)
    h = outcome_rates(converse(scripted_human(), asst, items, H=7, seed=1))
    a = outcome_rates(converse(artifact_simulator(), asst, items, H=7, seed=1))
    assert h["wrong_answers"] > 300 and h["accept_wrong_rate"] == 0.0
    assert a["wrong_answers"] > 200 and abs(a["accept_wrong_rate"] - ARTIFACT.accept_wrong) < 0.06

def test_deflection_rate(items):
    asst = ScriptedAssistant(ask_rate=1.0, slip=0.0)
    r = act_rates(converse(scripted_human(deflect=0.4), asst, items, H=7, seed=2))
    answered = r.get("reveal", 0) + r.get("deflect", 0)
    assert abs(r["deflect"] / answered - 0.4) < 0.05

def test_vagueness_rate(items):
    ops = _openings(scripted_human(vagueness=0.5), items)
    key = "a" if items[0].task == "math-chat" else "draft"
    eligible = [st for (_, st), it in zip(ops, items) if key not in it.goal["hidden"]]   # not already withheld by the item
    rate = sum(key in st["hidden"] for st in eligible) / len(eligible)
    assert abs(rate - 0.5) < 0.05, rate

def test_collapse_lowers_diversity(items):
    div = lambda u: len({t.text.split(" ")[0] for t, _ in _openings(u, items)})
    assert div(scripted_human(collapse=1.0, typo_rate=0.0)) < div(scripted_human(collapse=0.0, typo_rate=0.0))

def test_patience_and_terminal_signal(items):
    d = converse(scripted_human(patience=3, deflect=0.0), ScriptedAssistant(ask_rate=0.0, slip=1.0), items[:200], H=7, seed=4)
    for x in d:
        assert len([m for m in x.messages if m["role"] == "assistant"]) <= 3
        assert x.termination == "terminated" and has_terminal(x.messages[-1]["content"])

def test_early_stop_rate(items):
    d = converse(artifact_simulator(early_stop=0.5, accept_wrong=0.0), ScriptedAssistant(ask_rate=1.0), items, H=7, seed=5)
    r = act_rates(d)
    asst_turns = sum(len([m for m in x.messages if m["role"] == "assistant"]) for x in d)
    stops = sum("early_stop" in a for x in d for a in x.user_acts)
    assert abs(stops / asst_turns - 0.5) < 0.05
