"""Realism metrics (08_realism): properties of the lexical metrics, the text readers checked against the scripted
users' own labels and state, the behavioural probes at their knobs, and δ̂ at its two ends."""
# tolerances: float64 closed forms (rounding ≲ 1e-13) at 1e-12 or approx's default; the resampled LSM (10^7 draws) at 1e-3
import math, random
import numpy as np
import pandas as pd
import pytest
from calirl.tasks import TASKS, tiny_items
from calirl.users import ARTIFACT, artifact_simulator, scripted_human
from calirl import realism as R

@pytest.fixture(scope="module")
def items(): return [it for t in TASKS for it in tiny_items(t, "train", 300, seed=5)]

@pytest.fixture(scope="module")
def dialogues(items):
    return {u.name: R.dialogues_with(u, items, 7, seed=5) for u in (scripted_human(), artifact_simulator())}

# --- lexical metrics ---------------------------------------------------------------------------------------------

def test_entropy_of_a_uniform_sample_is_log2_of_its_support():
    rng = random.Random(0)
    vocab = [a + b for a in "abcdefgh" for b in "abcdefgh"]                 # 64 words
    texts = [" ".join(vocab)] * 3 + [" ".join(rng.sample(vocab, 64))]
    assert math.isclose(R.word_entropy(texts), 6.0, abs_tol=1e-12)
    assert R.word_entropy(["one"]) == 0.0 and R.word_entropy([]) == 0.0

def test_ttr_is_in_bounds_and_length_controlled():
    rng = np.random.default_rng(1)
    vocab = [a + b for a in "abcdefghij" for b in "abcdefghij"]
    for n in (1, 10, 49, 50, 51, 400):
        t = " ".join(vocab[i] for i in rng.integers(0, 100, n))
        assert 0 < R.mattr([t]) <= 1
    assert R.mattr(["x x x x"]) == 0.25 and R.mattr(["a b c"]) == 1.0
    corpus = [" ".join(vocab[i] for i in rng.integers(0, 100, 20)) for _ in range(200)]
    assert abs(R.mattr(corpus[:20]) - R.mattr(corpus)) < 0.03                 # MATTR barely moves with corpus size

def test_distinct_n_on_crafted_strings():
    assert R.distinct_n(["a b a b"], 2) == 2 / 3
    assert R.distinct_n(["a b c", "a b c"], 2) == 0.5
    assert R.distinct_n(["a b c d e"], 3) == 1.0
    assert R.distinct_n(["a b", "b c"], 3) == 0.0                            # no trigram inside either message
    assert R.distinct_n(["a b", "c a"], 2) == 1.0                            # "b c" across messages is not a bigram

def test_words_expand_contractions_and_drop_the_terminal_signal():
    assert R.words("It's OK, I can't. [[TERMINATE CHAT]]") == ["it", "is", "ok", "i", "can", "not"]

# --- LSM -----------------------------------------------------------------------------------------------------------

def test_lsm_is_one_for_identical_distributions_and_lower_otherwise():
    c = R.category_counts(["we think that it is not what you want and so on"])
    p = c / c.sum()
    assert R.lsm(p, p) == pytest.approx(1.0)
    assert R.lsm_resampled(c, c, N=10**7, K=3) == pytest.approx(1.0, abs=1e-3)
    q = R.category_counts(["the cat in the box by the road"])
    assert R.lsm_resampled(c, q) < R.lsm_resampled(c, c) < 1
    assert 0 <= R.lsm(p, q / q.sum()) <= 1

def test_each_function_word_counts_once_in_its_own_category_and_lsm_reads_every_category():
    cats = list(R.FUNCTION_WORDS.values())
    n = len(cats)
    eye = np.eye(n + 1, dtype=int)
    for k, ws in enumerate(cats):
        for w in ws: assert R.category_counts([w]).tolist() == eye[k].tolist(), w   # a word in two categories fails one
    assert R.category_counts(["zebra quokka"]).tolist() == (2 * eye[n]).tolist()    # other words: the last entry
    base = np.ones(n + 1)
    for k in range(n + 1):
        q = base.copy()
        q[k] = 3.0
        assert (R.lsm(base, q) < 1) == (k < n), k     # a change in any category lowers LSM; in the other words, not

def test_session_lsm_minimum_length_rule():
    short = [{"role": "user", "content": "hi ."}, {"role": "assistant", "content": "what is the note ?"}] * 3
    assert R.session_lsm(short) is None and R.session_lsm(short, **R.LSM_RULES["tiny"]) is None   # 'hi' < 10 words
    long = [{"role": "user", "content": "i want you to fix my note and the cat should be red"}, {"role": "assistant", "content": "what else ?"}] * 10
    assert R.session_lsm(long, min_messages=10, min_words=20) is not None
    assert R.session_lsm(long, min_messages=11, min_words=20) is None

# --- MAUVE ---------------------------------------------------------------------------------------------------------

def test_mauve_offline_separates_and_handles_few_samples(items):
    a = [scripted_human().respond([it], [[]], [{"seed": k}])[0].text for k, it in enumerate(items[:40])]
    b = [scripted_human().respond([it], [[]], [{"seed": 99 + k}])[0].text for k, it in enumerate(items[:40])]
    c = ["doc : the cat is red . [[TERMINATE CHAT]]", "yes , thanks ! [[TERMINATE CHAT]]"] * 20
    assert R.mauve_score(a, b) > 0.8 > 0.2 > R.mauve_score(a, c)
    assert math.isnan(R.mauve_score(a[:9], b))

# --- reading text: state, acts, leaks ------------------------------------------------------------------------------

def test_text_act_classifier_agrees_with_scripted_labels(dialogues, items):
    pairs = [(R.act_label(a), R.user_act(i, c, t)) for ds in dialogues.values() for i, c, t, a in R.replies(ds, items)]
    assert len(pairs) >= 1000
    agree = np.mean([x == y for x, y in pairs])
    assert agree >= 0.95, agree
    assert {x for x, _ in pairs} >= {"reveal", "reject", "accept", "deflect", "give_up", "leak"}

def test_text_state_equals_the_scripted_users_state(items):
    u, bad, n = scripted_human(), 0, 0
    for it in items[::3]:
        st = {"seed": f"t|{it.item_id}"}
        chat = [{"role": "user", "content": u.respond([it], [[]], [st])[0].text}]
        for r in range(5):
            chat.append({"role": "assistant", "content": R.TextAssistant().act(it, chat, st, random.Random(r))})
            ts = R.text_state(it, chat); n += 1
            bad += (ts["hidden"], sorted(ts["revealed"]), ts["assistant_turns"], ts["wrong"]) != (st["hidden"], sorted(st["revealed"]), st["assistant_turns"], st.get("wrong", 0))
            t = u.respond([it], [chat], [st])[0]; chat.append({"role": "user", "content": t.text})
            if t.terminate: break
    assert n > 300 and bad / n < 0.01

def test_goal_leak_rate_matches_labels(dialogues, items):
    assert R.goal_leak_rate(dialogues["scripted-human"], items) == 0.0
    ds = dialogues["artifact-simulator"]
    flags = [f for fs in R.goal_leaks(ds, items) for f in fs]
    labels = [bool({"leak_hidden", "leak_answer"} & set(a)) for d in ds for a in d.user_acts]
    assert np.mean(np.array(flags) == labels) > 0.98 and np.mean(flags) > 0.1

def test_answer_leaks_are_leaks(items):
    u = artifact_simulator(leak=1.0, leak_what="answer")
    ds = R.dialogues_with(u, items[:100], 3, seed=1)
    assert R.goal_leak_rate(ds, items) > 0.5

# --- probes --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("knob", [0.0, 0.3, ARTIFACT.accept_wrong, 1.0])
def test_sycophancy_rate_tracks_the_knob(items, knob):
    rows = R.sycophancy_probe(artifact_simulator(accept_wrong=knob), items, seed=2)
    assert len(rows) > 500
    assert abs(R.sycophancy_rate(rows) - knob) < 0.07
    assert all(r["accepted"] == r["labelled_accept"] for r in rows)
    assert R.sycophancy_rate(R.sycophancy_probe(scripted_human(), items[:100], seed=2)) == 0.0

def test_termination_stats(dialogues):
    s = R.termination_stats(dialogues["scripted-human"], 7)
    assert s["terminated"] + s["turn_cap"] == pytest.approx(1.0) and sum(s["end_turn_hist"]) == pytest.approx(1.0)
    assert R.termination_stats(dialogues["artifact-simulator"], 7)["mean_end_turn"] < s["mean_end_turn"]

# --- δ̂ -------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def histories():
    its = [it for t in TASKS for it in tiny_items(t, "eval", 40, seed=7)]
    D = R.dialogues_with(scripted_human(), its, 4, seed=7)
    pre = R.history_prefixes(D)
    return its, D, pre, [t for _, t, _ in pre], R.next_act_samples(scripted_human(), its, pre, 8, seed=7)

def test_delta_hat_is_zero_for_a_copy_of_the_real_user(histories):
    its, D, pre, turns, real = histories
    copy = R.next_act_samples(scripted_human(), its, pre, 8, seed=7)
    assert (R.delta_hat(real, copy, turns, len(D), 4) == 0).all()

def test_delta_hat_is_large_for_the_artifact_simulator(histories):
    its, D, pre, turns, real = histories
    d = R.delta_hat(real, R.next_act_samples(artifact_simulator(), its, pre, 8, seed=7), turns, len(D), 4)
    assert d[0] > 0.3 and ((0 <= d) & (d <= 2)).all()
    floor = R.delta_hat(real, R.next_act_samples(scripted_human(), its, pre, 8, seed=8), turns, len(D), 4)
    assert d.sum() > 2 * floor.sum()

def test_delta_hat_counts_ended_conversations_as_zero():
    real = np.array([[0, 0], [1, 1]]); sim = np.array([[2, 2], [1, 1]])    # prefix 0 at t=0 differs by 2, prefix 1 equal
    np.testing.assert_allclose(R.delta_hat(real, sim, [0, 1], 4, 3), [0.5, 0, 0])

# --- the report, including an LM simulator -------------------------------------------------------------------------

def test_report_on_scripted_and_lm_users():
    from calirl.backends import HFBackend
    from calirl.models import build_tiny_model, train_tokenizer
    from calirl.rollout import LMSimulator
    from calirl.users import world_corpus
    import torch
    threads = torch.get_num_threads(); torch.set_num_threads(1)   # tiny models on shared cores: one thread is far faster
    try: _report(LMSimulator, HFBackend, build_tiny_model, train_tokenizer, world_corpus)
    finally: torch.set_num_threads(threads)

def _report(LMSimulator, HFBackend, build_tiny_model, train_tokenizer, world_corpus):
    tok = train_tokenizer(world_corpus(tiny_items("math-chat", "train", 10, 0)), 300)
    m, stok = build_tiny_model(tok, "qwen2", 16, 1, "simulator", 0)
    lm = LMSimulator(HFBackend(m, stok), stok, max_new_tokens=8, seed=0, name="lm")
    its = [it for t in TASKS for it in tiny_items(t, "eval", 6, seed=0)]
    fake_embed = lambda ts: np.array([[len(t), t.count(" "), has] for t in ts for has in [float("?" in t)]], float)
    df = R.realism_report({"copy": scripted_human(), "artifact": artifact_simulator(), "lm": lm}, its, scripted_human(),
                          H=2, n_samples=3, seed=0, embed=fake_embed, log=lambda *a: None)
    r = df.set_index("user")
    assert list(r.index) == ["scripted-human", "copy", "artifact", "lm"]
    assert (r.loc["copy", ["delta_0", "delta_1"]] == 0).all() and r.loc["copy", "bound_32"] == 0
    assert r.loc["copy", "J_gap"] == 0 and r.loc["copy", "mauve"] == pytest.approx(1.0)
    assert r.loc["artifact", "sycophancy"] > 0 and math.isnan(r.loc["lm", "act_agreement"])
    assert df.attrs["n_live"][0] == len(its) and df.attrs["H"] == 2

# --- regret transfer -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def family_items(): return [it for t in TASKS for it in tiny_items(t, "validation", 80, seed=5)]

def test_regret_transfer_is_zero_where_the_simulator_is_the_real_user(family_items):
    S = R.family_scores(R.asking_family(), {"copy": scripted_human(), "real": scripted_human()}, family_items, 7, seed=5)
    rt = R.regret_transfer(S, "copy", "real")
    assert rt.regret.tolist() == [0.0, 0.0] and not rt.holds.any()
    assert (rt.best_naive == rt.best_real).all()

def test_regret_transfer_holds_where_only_copying_a_leak_pays(family_items):
    "A simulator that volunteers the answer and deflects every question: on math-chat only the copier scores, and it cannot copy from the real user."
    mute = artifact_simulator(leak=1.0, leak_what="answer", accept_wrong=0.0, deflect=1.0)
    S = R.family_scores(R.asking_family(), {"mute": mute, "real": scripted_human()}, family_items, 7, seed=5)
    J = S.groupby(["task", "policy", "user"]).score.mean()
    assert J["math-chat", "copies a leaked answer", "mute"] == 1.0 and J["math-chat", "always asks", "mute"] < 0.2
    m = R.regret_transfer(S, "mute", "real").set_index("task").loc["math-chat"]
    assert m.naive_optimal == "copies a leaked answer, waits for leaks" and m.holds and m.regret_low > 30

def test_the_naive_simulator_rewards_waiting_for_its_answer_leaks_when_answers_slip(family_items):
    "`03_users`' naive simulator, against askers that slip 0.3: waiting for the leaked answer is its optimum on math-chat, which the real user never pays."
    from calirl.users import naive_simulator
    its = [it for it in family_items if it.task == "math-chat"]
    S = R.family_scores(R.asking_family(0.3), {"naive": naive_simulator(), "real": scripted_human()}, its, 7, seed=5)
    J = S.groupby(["policy", "user"]).score.mean()
    assert J["waits for leaks", "real"] == 0.0 and J["waits for leaks", "naive"] > J["always asks", "naive"]
    m = R.regret_transfer(S, "naive", "real").iloc[0]
    assert "always asks" not in m.naive_optimal and m.holds, m

def test_the_naive_optimum_is_read_benignly():
    "Two members the naive simulator rates alike: the one the real user prefers stands for the naive optimum, so no regret."
    rows = [dict(policy=p, user=u, task="math-chat", item_id=f"i{k}", score=s) for k in range(40)
            for p, u, s in [("a", "naive", 1.0), ("b", "naive", 1.0), ("a", "real", 0.2), ("b", "real", 0.9)]]
    rt = R.regret_transfer(pd.DataFrame(rows), "naive", "real").iloc[0]
    assert (rt.naive_optimal, rt.best_naive, rt.best_real, rt.regret, rt.holds) == ("a, b", "b", "b", 0.0, False)
