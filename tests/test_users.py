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

def test_naive_simulator_leaks_the_answer_at_its_rate_and_then_facts_at_theirs(items):
    from calirl.users import NAIVE, naive_simulator
    ops = _openings(naive_simulator(), items)
    answer = sum("leak_answer" in t.acts for t, _ in ops) / N
    facts = sum("leak_hidden" in t.acts for t, _ in ops) / N
    assert abs(answer - NAIVE.leak_answer) < 0.04, answer                     # drawn first
    assert abs(facts - (1 - NAIVE.leak_answer) * NAIVE.leak) < 0.05, facts    # then the fact leak, on the turns without one

def test_an_answer_leak_rate_of_zero_leaves_every_other_users_conversations_as_they_were():
    "The answer-leak draw is made only when the knob is set: the human's and the artifact simulator's conversations are unchanged (digests of the code before the knob)."
    import hashlib, json
    want = {"scripted-human": "c741ffa4225d59ac", "artifact-simulator": "b250c1c2ff2962b3"}
    for u in (scripted_human(), artifact_simulator()):
        h = hashlib.sha256()
        for t in ("math-chat", "docedit-chat"):
            for c in converse(u, ScriptedAssistant(0.5, 0.1), tiny_items(t, "train", 200, 0), H=7, seed=0):
                h.update(json.dumps([c.messages, [list(a) for a in c.user_acts]]).encode())
        assert h.hexdigest()[:16] == want[u.name], u.name

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


def test_keep_asking_only_after_a_chosen_question():
    "A teacher with `keep_asking` asks until told everything once it *chose* to ask; a forced question (the hidden draft) does not commit it."
    from calirl.tasks import tiny_items
    from calirl.dialogue import converse
    from calirl.users import ScriptedAssistant, scripted_human
    its = tiny_items("docedit-chat", "demo", 200, 0)
    never = converse(scripted_human(deflect=0.0, vagueness=1.0), ScriptedAssistant(0.0, 0.0, keep_asking=True), its, 7, 0)
    assert all(sum(m["content"].endswith("?") for m in c.messages if m["role"] == "assistant") == 1 for c in never)   # only the forced draft question
    chose = converse(scripted_human(deflect=0.0, vagueness=0.0), ScriptedAssistant(0.3, 0.0, keep_asking=True), its, 7, 0)
    q = lambda c: [m["content"].endswith("?") for m in c.messages if m["role"] == "assistant"]
    asked = [c for c in chose if q(c)[0]]                                    # chose to ask first (the draft was shown)
    by = {it.item_id: it for it in its}
    assert len(asked) > 30 and any(len(by[c.item_id].goal["edits"]) == 2 for c in asked)   # some needed two questions after the first
    assert all(q(c).count(False) == 1 and "accept" in c.user_acts[-1] for c in asked)   # asked until told every edit, then one right answer
    plain = converse(scripted_human(), ScriptedAssistant(0.2, 0.1), its, 7, 0)
    assert plain == converse(scripted_human(), ScriptedAssistant(0.2, 0.1, keep_asking=False), its, 7, 0)   # off: the old teacher, draw for draw


def test_simulator_starts_from_the_base_policy(tmp_path):
    "`simulator_model = tiny-base` loads the base policy's weights with the simulator's template, and needs the base's folder."
    import pytest, torch
    from calirl.models import build_tiny_model, save_model, train_tokenizer, with_role
    from calirl.sim_sft import simulator_init
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    tok = train_tokenizer(world_corpus(tiny_items("math-chat", "train", 16, 0), 0), 400)
    pol, ptok = build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=3)
    save_model(pol, ptok, tmp_path / "base")
    sim, stok = simulator_init("tiny-base", ptok, "qwen2", 32, 1, False, 0, base=str(tmp_path / "base"))
    assert all(torch.equal(a, b) for a, b in zip(sim.state_dict().values(), pol.state_dict().values()))
    assert stok.chat_template == with_role(ptok, "simulator").chat_template != ptok.chat_template
    fresh, _ = simulator_init("tiny", ptok, "qwen2", 32, 1, False, 0)
    assert not all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), pol.state_dict().values()))
    with pytest.raises(ValueError, match="tiny-base"): simulator_init("tiny-base", ptok, "qwen2", 32, 1, False, 0)

def test_wrong_patience_ends_the_chat_at_that_many_wrong_answers(items):
    "A user who tolerates k wrong answers gives up at the k-th; the default (0) leaves the chat to `patience`."
    asst = ScriptedAssistant(ask_rate=0.0, slip=1.0)                                  # every answer wrong
    for k in (1, 2):
        for x in converse(scripted_human(wrong_patience=k, patience=7), asst, items[:200], H=7, seed=6):
            rejects = sum("reject" in a for a in x.user_acts)
            assert rejects <= k and ("give_up" in x.user_acts[-1]) == (rejects == k), (k, x.user_acts)
    base = converse(scripted_human(patience=7), asst, items[:200], H=7, seed=6)
    assert max(sum("reject" in a for a in x.user_acts) for x in base) > 2              # without it, the human goes on rejecting
