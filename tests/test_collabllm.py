"""CollabLLM baseline (`calirl.collabllm`): the multiturn-aware reward on hand-built conversations, pair selection
and filtering, and the preference Parquet schema. No model weights: a stub policy and a locally trained tokenizer."""
# tolerances: rewards are sums of ≤ 5 float64 terms of size ≤ 1 (rounding ≲ 1e-15): pytest.approx's default (1e-6 relative)
import pandas as pd
import pytest
from calirl.backends import Backend, Completion
from calirl.collabllm import (MR_MIN_GAP, MR_SAMPLES, MR_WEIGHTS, PAIR_COLUMNS, contexts_from_traces,
                              ask_rates, conversation_reward, forward_sample, interactivity, mr_pairs, multiturn_aware_rewards,
                              pair_check, pair_verdict, pick_pair, preference_row, sample_contexts, token_penalty, turn_kind,
                              user_state, withheld)
from calirl.artifacts import save_parquet
from calirl.dialogue import Conversation, turn_rng
from calirl.tasks import tiny_items
from calirl.users import ScriptedAssistant, artifact_simulator, scripted_human

MATH = tiny_items("math-chat", "train", 40, 0)
DOC = tiny_items("docedit-chat", "train", 20, 0)

@pytest.fixture(scope="module")
def tok():
    from calirl.models import train_tokenizer, with_role
    from calirl.users import world_corpus
    return with_role(train_tokenizer(world_corpus(MATH[:20] + DOC, 0), 300), "policy")

def _add_item():
    return next(it for it in MATH if it.goal["op"] == "add" and "a" not in it.goal.get("hidden", []))

def _chat(*turns): return [{"role": r, "content": c} for r, c in turns]

# ---------------------------------------------------------------- the conversation-level reward
def _sub_item():
    return next(it for it in MATH if it.goal["op"] == "sub" and it.goal["hidden"] == ["b"])

def _asked(it):
    "A conversation that asked for the withheld number and was told it, and its acts."
    g = it.goal
    return _chat(("user", f"{g['name']} has {g['a']} {g['obj']} and gives away some ."), ("assistant", "how many ?"),
                 ("user", f"{g['name']} gives away {g['b']} .")), [["open"], ["reveal"]]

def test_right_answer_beats_wrong_answer():
    it = _sub_item()
    pre, acts = _asked(it)
    right = conversation_reward(it, pre + _chat(("assistant", f"the answer is {it.y_star}")), acts, 1, 30)
    wrong = conversation_reward(it, pre + _chat(("assistant", f"the answer is {int(it.y_star) + 1}")), acts, 1, 30)
    assert right["R"] > wrong["R"]
    assert right["R"] - wrong["R"] == pytest.approx(MR_WEIGHTS["math-chat"].task)
    assert (right["score"], wrong["score"]) == (1.0, 0.0)

def test_docedit_outcome_is_bleu_of_final_document():
    it = DOC[0]
    good = conversation_reward(it, _chat(("user", "fix it"), ("assistant", f"doc : {it.y_star}")), [["open"]], 1, 10)
    none = conversation_reward(it, _chat(("user", "fix it"), ("assistant", "what should change ?")), [["open"]], 1, 10)
    assert good["score"] == pytest.approx(1.0) and none["score"] == 0.0 and good["R"] > none["R"]

@pytest.mark.parametrize("task,items", [("math-chat", MATH), ("docedit-chat", DOC)])
def test_more_tokens_cost_exactly_lambda_delta(task, items):
    it, lam = items[0], MR_WEIGHTS[task].tokens
    msgs = _chat(("user", "hi"), ("assistant", "the answer is 3 . doc : the cat is red ."))
    r = [conversation_reward(it, msgs, [["open"]], 1, n)["R"] for n in (40, 140, 1040)]
    assert r[1] - r[0] == pytest.approx(-lam * 100 / 1000)
    assert r[2] - r[1] == pytest.approx(-lam * 900 / 1000)
    assert token_penalty(10**7, lam) == 1.0                                  # the paper's cap

def test_interactivity_rewards_asking_only_for_what_is_withheld():
    it = _sub_item()
    pre, acts = _asked(it)
    assert withheld(it, pre[:1], acts[:1]) == ["b"] and withheld(it, pre, acts) == []
    answer = _chat(("assistant", f"the answer is {it.y_star}"))
    assert interactivity(it, pre + answer, acts, 1) == 1.0                          # the perfect asker
    assert interactivity(it, pre + _chat(("assistant", "how many ?")), acts, 1) == 0.5   # asks again for what it was told
    assert interactivity(it, pre[:1] + answer, acts[:1], 1) == 0.0                  # guesses while b is withheld
    leaked = [["open", "leak_hidden"]]                                               # the user volunteered everything
    assert withheld(it, pre[:1], leaked) == [] and interactivity(it, pre[:1] + _chat(("assistant", "how many ?")), leaked, 1) == 0.0

def test_interactivity_bonus_only_where_configured():
    m, d = _sub_item(), DOC[0]
    pre, acts = _asked(m)
    asked = conversation_reward(m, pre, acts, 1, 5)["R"]
    asked_again = conversation_reward(m, pre + _chat(("assistant", "how many ?")), acts, 1, 5)["R"]
    assert asked - asked_again == pytest.approx(MR_WEIGHTS["math-chat"].interact * (1.0 - 0.5))   # I: 1 → ½, score 0 both
    msgs = _chat(("user", "hi"), ("assistant", "what ?"))
    assert conversation_reward(d, msgs, [["open"]], 1, 5)["interact"] == 0.0 == MR_WEIGHTS["docedit-chat"].interact
    from calirl.tasks import TaskItem
    with pytest.raises(ValueError, match="needs a judge model"):
        conversation_reward(TaskItem("math-chat", "x", "q", "3"), msgs, [["open"]], 1, 5)

def test_turn_kind():
    it = MATH[0]
    assert [turn_kind(it, t) for t in ("how many more ?", "2 + 3 = 5 . the answer is 5", "ok .")] == ["ask", "answer", "other"]
    assert turn_kind(DOC[0], "doc : the cat is red .") == "answer"

# ---------------------------------------------------------------- forward sampling
def test_user_state_rebuilds_scripted_memory():
    human, bot = scripted_human(), ScriptedAssistant(ask_rate=0.5)
    for it in MATH[:15] + DOC[:10]:
        st, msgs, acts = {"seed": f"t|{it.item_id}"}, [], []
        for rnd in range(5):
            u = human.respond([it], [msgs], [st])[0]
            msgs.append({"role": "user", "content": u.text}); acts.append(list(u.acts))
            rebuilt = user_state(it, msgs, acts)
            assert {k: rebuilt[k] for k in ("hidden", "revealed", "assistant_turns")} == {k: st[k] for k in ("hidden", "revealed", "assistant_turns")}
            assert rebuilt["wrong"] == st.get("wrong", 0)
            if u.terminate: break
            msgs.append({"role": "assistant", "content": bot.act(it, msgs, st, turn_rng({"seed": "a"}, rnd))})

class Solver(Backend):
    "Answers right once the user's last message holds b, else asks."
    def __init__(self, tok, item): self.tok, self.item = tok, item
    def generate(self, prompts, max_new_tokens, temperature=1.0, top_p=1.0, seed=None, stop_token_ids=None):
        out = []
        for p in prompts:
            last = self.tok.decode(p).rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]
            t = f"the answer is {self.item.y_star}" if str(self.item.goal["b"]) in last.split() else "how many more ?"
            out.append(Completion(self.tok(t, add_special_tokens=False)["input_ids"], t, None, "stop"))
        return out

def test_mr_prefers_asking_and_respects_turn_cap(tok):
    it = _add_item(); g = it.goal
    ctx = _chat(("user", f"{g['name']} has {g['a']} {g['obj']} and gets some more . how many {g['obj']} now ?"))
    user = artifact_simulator(leak=0.0, accept_wrong=1.0)
    jobs = [dict(item=it, context=ctx, acts=[["open"]], response=r)
            for r in ("how many more did you get ?", f"the answer is {int(it.y_star) + 2}", f"the answer is {it.y_star}")]
    mr = multiturn_aware_rewards(Solver(tok, it), tok, user, jobs, 16, H=4, seed=0, policy_prompt="plain")
    assert mr[0]["mr"] > mr[2]["mr"] > mr[1]["mr"]
    assert mr[0]["interact"] == 1.0 and mr[2]["interact"] == 0.0 and mr[1]["score"] == 0.0 and all(m["n_scored"] == MR_SAMPLES for m in mr)
    with pytest.raises(ValueError, match="needs the turn cap H"): multiturn_aware_rewards(Solver(tok, it), tok, user, jobs, 16, policy_prompt="plain")
    two = multiturn_aware_rewards(Solver(tok, it), tok, user, jobs[:1], 16, window=1, H=4, policy_prompt="plain")[0]   # a fixed window still works
    assert two["score"] == 1.0
    capped = multiturn_aware_rewards(Solver(tok, it), tok, user, jobs[:1], 16, H=1, policy_prompt="plain")[0]      # no room after the response
    assert capped["score"] == 0.0 and capped["interact"] == 1.0                              # it asked, and b was withheld
    chats, acts = forward_sample(Solver(tok, it), tok, user, [it], [ctx + [dict(role="assistant", content="how many more ?")]],
                                 [user_state(it, ctx, [["open"]])], [2], 16, 1.0, 0, None, "plain")
    assert acts[0] == [["reveal"], ["accept"]] and [m["role"] for m in chats[0]] == ["user", "assistant", "user", "assistant", "user"]

# ---------------------------------------------------------------- pairs
def test_pick_pair_selection_and_filtering():
    assert pick_pair([0.2, 0.9, -0.1, 0.5], list("abcd")) == (1, 2)
    assert pick_pair([0.3, 0.3 + MR_MIN_GAP / 2], ["a", "b"]) is None            # near-tie
    assert pick_pair([0.3, 0.3 + 2 * MR_MIN_GAP], ["a", "b"]) == (1, 0)
    assert pick_pair([None, 0.9, None, 0.1], list("abcd")) == (1, 3)                # unscorable candidates left out
    assert pick_pair([None, 0.9], ["a", "b"]) is None
    assert pick_pair([1.0, 0.0], ["same text", " same text "]) is None             # identical responses
    assert pick_pair([0.5, 0.5, 0.5], list("abc")) is None                          # all tied

def test_preference_parquet_schema(tok, tmp_path):
    it = MATH[0]
    ctx = _chat(("user", "kim has some shells ."), ("assistant", "how many ?"), ("user", "14 ."))
    rows = [preference_row(tok, it, ctx, " how many did kim give away ?", "the answer is 3", 1.4, 0.2, 0),
            preference_row(tok, it, ctx[:1], "the answer is 9", "ok .", 0.9, -0.01, 1)]
    p = save_parquet(rows, tmp_path / "pairs.parquet")
    df = pd.read_parquet(p)
    assert list(df.columns) == PAIR_COLUMNS and len(df) == 2
    for c in ("prompt", "chosen", "rejected", "item_id", "task", "chosen_kind", "rejected_kind"):
        assert df[c].map(type).eq(str).all(), c
    assert df.mr_chosen.dtype == float and (df.mr_chosen - df.mr_rejected >= MR_MIN_GAP).all()
    assert df.prompt.str.endswith("<|im_start|>assistant\n").all()
    r = df.iloc[0]
    full = tok.apply_chat_template(ctx + [{"role": "assistant", "content": r.chosen}], tokenize=False)
    assert full.startswith(r.prompt + r.chosen + tok.eos_token)
    assert (r.chosen, r.chosen_kind, r.rejected_kind) == ("how many did kim give away ?", "ask", "answer")

def test_contexts_from_oracle_traces():
    it = MATH[0]
    msgs = _chat(("user", "q"), ("assistant", "how many ?"), ("user", "5 more ."), ("assistant", "the answer is 3"),
                 ("user", "no ."), ("assistant", "the answer is 4"), ("user", "yes [[TERMINATE CHAT]]"))
    tr = Conversation(it.item_id, it.task, 0, messages=msgs, user_acts=[["open"], ["reveal"], ["reject"], ["accept"]])
    cs = contexts_from_traces([tr], {it.item_id: it}, H=7)
    assert [len(c["context"]) for c in cs] == [1, 3, 5]                           # the terminal user message is no context
    assert cs[2]["acts"] == [["open"], ["reveal"], ["reject"]]
    assert [len(c["context"]) for c in contexts_from_traces([tr], {it.item_id: it}, H=2)] == [1, 3]
    with pytest.raises(KeyError, match="has no item"): contexts_from_traces([tr], {}, H=7)
    pool = [dict(item=x, context=[], acts=[]) for x in MATH[:10] + DOC[:10]]
    got = sample_contexts(pool, 7, ["math-chat", "docedit-chat"], seed=1)
    assert [c["item"].task for c in got].count("math-chat") == 4 and len(got) == 7
    assert sample_contexts(pool, 7, ["math-chat", "docedit-chat"], seed=1) == got


class Mixed(Solver):
    "Answers right once the user's last message holds b; before that, its k-th reply cycles: ask, a wrong guess."
    def __init__(self, tok, item): super().__init__(tok, item); self.k = 0
    def generate(self, prompts, max_new_tokens, temperature=1.0, top_p=1.0, seed=None, stop_token_ids=None):
        out = []
        for p in prompts:
            last = self.tok.decode(p).rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]
            if str(self.item.goal["b"]) in last.split(): t = f"the answer is {self.item.y_star}"
            else:
                t = ["how many more ?", f"the answer is {int(self.item.y_star) + 2}"][self.k % 2]
                self.k += 1
            out.append(Completion(self.tok(t, add_special_tokens=False)["input_ids"], t, None, "stop"))
        return out

def test_pairs_and_their_check_with_the_real_user(tok):
    it = _add_item(); g = it.goal
    ctxs = [dict(item=it, context=_chat(("user", f"{g['name']} has {g['a']} {g['obj']} and gets some more . how many {g['obj']} now ?")), acts=[["open"]])] * 3
    pol = Mixed(tok, it)
    P, cands, chats = mr_pairs(pol, tok, artifact_simulator(leak=0.0, accept_wrong=1.0), ctxs, 2, 16, 1.0, 4, 0, None, "plain")
    assert len(P) == 3 and list(P.columns) == PAIR_COLUMNS and (P.chosen_kind == "ask").all() and (P.rejected_kind == "answer").all()
    assert (cands.pick == "chosen").sum() == 3 and len(cands) == 6 and all(c[-1]["content"] == "how many more ?" for c in chats)
    check = pair_check(Solver(tok, it), tok, scripted_human(), ctxs, cands, 16, 1.0, 4, 0, None, "plain")
    assert len(check) == 3 and check.withheld.all()
    assert (check.return_chosen > check.return_rejected).all()            # the human rejects the wrong guess; asking reaches the answer sooner
    v = pair_verdict(check, 0.6)
    assert (v["wins"], v["losses"], v["ties"]) == (3, 0, 0) and v["win_rate"] == 1.0 and not v["passed"]   # 3 of 3: interval still reaches ½
    assert ask_rates(check) == dict(ask_perfect=1.0, ask_chosen=1.0, ask_rejected=0.0, agree_chosen=1.0, agree_rejected=0.0)

def test_pair_verdict_counts_ties_and_unscored_apart():
    c = pd.DataFrame(dict(return_chosen=[1.0] * 30 + [0.0] * 5 + [0.5, None], return_rejected=[0.0] * 30 + [1.0] * 5 + [0.5, 0.0]))
    v = pair_verdict(c, 0.6)
    assert (v["pairs"], v["scored"], v["wins"], v["losses"], v["ties"]) == (37, 36, 30, 5, 1)
    assert v["win_rate"] == pytest.approx(30 / 35) and 0.5 < v["lo"] < v["win_rate"] < v["hi"] and v["passed"]
    assert not pair_verdict(c, 0.9)["passed"] and pair_verdict(c.iloc[:0], 0.0)["passed"] and not pair_verdict(c.iloc[:0], 0.6)["passed"]

def test_ask_rates_need_a_user_that_withholds():
    "A model user (the paper path) keeps no facts to withhold: no ask rates, rather than rates over unknowns."
    c = pd.DataFrame(dict(withheld=[None, None], chosen_kind=["ask", "answer"], rejected_kind=["answer", "answer"]))
    assert ask_rates(c) == {}
    mixed = pd.concat([c, pd.DataFrame(dict(withheld=[True], chosen_kind=["ask"], rejected_kind=["answer"]))], ignore_index=True)
    assert ask_rates(mixed) == dict(ask_perfect=1.0, ask_chosen=1.0, ask_rejected=0.0, agree_chosen=1.0, agree_rejected=0.0)
