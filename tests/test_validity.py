"""Predictive validity (12_validity): the text labeller against the scripted users' own acts, the issue annotator on
hand-made transcripts, BCE / Pearson / KL / A/B / Kendall's W on known inputs, the LLM-annotator parser on malformed
output, and the human-judgment page driven in a real headless Chromium."""
# tolerances: float64 closed forms and scipy's statistics on ≤ 100 values (rounding ≲ 1e-13): approx's default or 1e-9 relative; 1e-5 where a log is clipped at 1e-6
import html, json, random, re, shutil, subprocess, tempfile
from pathlib import Path
import numpy as np
import pytest
from scipy import stats
from calirl.tasks import TASKS, tiny_items
from calirl.users import ScriptedAssistant, artifact_simulator, scripted_human
from calirl.dialogue import converse
from calirl import validity as V
from calirl import stats as S

@pytest.fixture(scope="module")
def math_item():
    return next(i for i in tiny_items("math-chat", "eval", 50, 0) if i.goal["op"] == "add" and i.goal["hidden"] == ["b"])

def _opening(it):
    g = it.goal
    return {"role": "user", "content": f"{g['name']} has {g['a']} {g['obj']} and gets some more . how many {g['obj']} does {g['name']} have now ?"}

# --- user-behaviour taxonomy ---------------------------------------------------------------------------------------

# an answer-leaking user that later "reveals" a docedit edit repeats what its leaked target document already said: the
# text labeller (rightly) sees nothing new there, its act record says `reveal` — so that user is checked on math only
@pytest.mark.parametrize("user,tasks", [(scripted_human(), TASKS), (artifact_simulator(), TASKS),
                                        (artifact_simulator(leak_what="answer"), ("math-chat",)),
                                        (scripted_human(early_stop=0.1, typo_rate=0.1), TASKS)],
                         ids=["human", "artifact", "artifact-leaks-answer", "human-typos-early-stop"])
def test_text_labeller_matches_the_scripted_users_own_acts(user, tasks):
    items = [it for t in tasks for it in tiny_items(t, "train", 120, seed=3)]
    exact, per = V.labeller_agreement(converse(user, ScriptedAssistant(ask_rate=0.5, slip=0.2), items, 7, seed=3), items)
    assert exact > 0.95, per
    assert (per.agreement > 0.95).all(), per

def test_labels_are_multi_label_and_opening_is_special(math_item):
    it, op = math_item, _opening(math_item)
    ask = [op, {"role": "assistant", "content": f"how many more did {it.goal['name']} get ?"}]
    assert V.user_labels(it, ask, f"{it.goal['b']} more . maybe {it.y_star} ?") == {"reveals", "leaks_goal"}
    assert V.user_labels(it, [], op["content"]) == set()
    assert V.user_labels(it, [], f"{op['content']} the answer is {it.y_star} .") == {"leaks_goal"}
    wrong = [op, {"role": "assistant", "content": f"the answer is {int(it.y_star) + 3}"}]
    assert V.user_labels(it, wrong, "yes , thanks ! [[TERMINATE CHAT]]") == {"agrees", "accepts_wrong", "terminates"}
    right = [op, {"role": "assistant", "content": f"the answer is {it.y_star}"}]
    assert V.user_labels(it, right, "yes , thanks ! [[TERMINATE CHAT]]") == {"agrees", "terminates"}

def test_bce_alignment():
    p = np.array([0.3, 0.0, 0.9])
    assert V.bce_excess(p, p) == pytest.approx(0.0, abs=1e-5)
    q = np.array([0.5, 0.2, 0.5])
    want = -np.mean(p * np.log(q) + (1 - p) * np.log(1 - q))
    assert V.bce_alignment(p, q) == pytest.approx(want, rel=1e-9)
    assert V.bce_excess(p, q) > 0 and np.isfinite(V.bce_alignment([1.0], [0.0]))         # clipped, never inf

# --- issues ----------------------------------------------------------------------------------------------------------

def test_issue_annotator_finds_known_issues_at_known_messages(math_item):
    it, op, y, b, nm = math_item, _opening(math_item), int(math_item.y_star), math_item.goal["b"], math_item.goal["name"]
    t = [op, {"role": "assistant", "content": f"how many more did {nm} get ?"}, {"role": "user", "content": f"{b} more ."},
         {"role": "assistant", "content": f"the answer is {y - 1}"}, {"role": "user", "content": "that is wrong ."},          # 3: ignores information
         {"role": "assistant", "content": "hmm"}, {"role": "user", "content": "ok , and ?"},                                  # 5: off task
         {"role": "assistant", "content": "anything else you can tell me ?"}, {"role": "user", "content": "that is all i have ."},   # 7: needless
         {"role": "assistant", "content": f"the answer is {y - 1}"}, {"role": "user", "content": "no ."},                     # 9: ignores + repeated
         {"role": "assistant", "content": f"the answer is {y}"}, {"role": "user", "content": "great ! [[TERMINATE CHAT]]"}]
    assert V.assistant_issues(it, t) == [(3, "ignores_information"), (5, "off_task"), (7, "needless_question"),
                                         (9, "ignores_information"), (9, "repeated_answer")]
    s = V.issue_summary([(it, t)])
    assert (s["assistant_messages"], s["messages_with_issue"], s["n_ignores_information"]) == (6, 4, 2)
    q = [op, {"role": "assistant", "content": "what did they get ?"}, {"role": "user", "content": "not sure ."}, {"role": "assistant", "content": "what did they get ?"}]
    assert V.assistant_issues(it, q) == [(3, "repeated_question"), (3, "no_final_answer")]
    assert V.assistant_issues(it, [op, {"role": "assistant", "content": f"the answer is {y + 5}"}]) == [(1, "premature_answer")]
    assert V.assistant_issues(it, [op]) == []

def test_issue_annotator_on_docedit():
    d = tiny_items("docedit-chat", "eval", 1, 0)[0]
    t = [{"role": "user", "content": "can you help me fix a note ?"}, {"role": "assistant", "content": f"doc : {d.y_star}"}]
    assert V.assistant_issues(d, t) == []
    t = [{"role": "user", "content": "can you help me fix a note ?"}, {"role": "assistant", "content": "doc : the cat is purple ."}]
    assert V.assistant_issues(d, t) == [(1, "premature_answer")]

# --- statistics ------------------------------------------------------------------------------------------------------

def test_pearson_matches_scipy_and_the_t_formula():
    rng = np.random.default_rng(0)
    x = rng.random(11); y = x + rng.normal(0, 0.3, 11)
    r = S.pearson(x, y)
    ref = stats.pearsonr(x, y)
    assert r["r"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert r["t"] == pytest.approx(r["r"] * np.sqrt(9) / np.sqrt(1 - r["r"] ** 2))
    assert np.isnan(S.pearson([1, 2], [2, 3])["r"]) and S.pearson([1, 2], [2, 3])["note"]
    assert np.isnan(S.pearson([1, 2, 3], [0, 0, 0])["p"])
    assert S.pearson([1, 2, 3, np.nan], [1, 2, 4, 5])["n"] == 3
    assert S.pearson([1, 2, 3], [2, 4, 6])["r"] == pytest.approx(1.0) and S.pearson([1, 2, 3], [2, 4, 6])["p"] < 1e-6

def test_kl_divergence():
    assert V.kl_divergence([5, 3, 0], [5, 3, 0]) == 0.0
    p, q = np.array([4.5, 0.5]) / 5, np.array([0.5, 4.5]) / 5                # alpha = 0.5 on counts [4, 0], [0, 4]
    assert V.kl_divergence([4, 0], [0, 4]) == pytest.approx(float((p * np.log(p / q)).sum()))
    assert V.kl_divergence([4, 0], [0, 4]) != V.kl_divergence([4, 0], [2, 2]) and np.isfinite(V.kl_divergence([9, 0], [0, 9]))

def test_ab_test_and_replication_on_synthetic_data():
    rng = np.random.default_rng(1)
    c, t_up, t_same = rng.binomial(1, 0.3, 300), rng.binomial(1, 0.5, 300), rng.binomial(1, 0.3, 300)
    up = V.ab_test(c, t_up)
    assert up["significant"] and up["direction"] == 1 and up["p"] == pytest.approx(stats.ttest_ind(t_up, c, equal_var=False).pvalue)
    same = V.ab_test(c, t_same)
    assert not same["significant"]
    down = V.ab_test(t_up, c)
    assert V.replicates(up, up)["replicates"] and not V.replicates(up, same)["replicates"]
    assert V.replicates(up, down) == dict(same_direction=False, same_significance=True, replicates=False)
    assert not V.ab_test([1], [1, 2])["significant"]                          # too few sessions: no decision, no crash

def test_kendalls_w():
    assert V.kendalls_w([[1, 2, 3, 4], [2, 1, 3, 4], [1, 3, 2, 4]]) == pytest.approx(35 * 12 / (9 * 60))
    assert V.kendalls_w([[3, 1, 2]] * 5) == pytest.approx(1.0)
    assert V.kendalls_w([[1, 2], [2, 1]]) == pytest.approx(0.0)
    # ties: two raters, a tie in the second; by hand ranks (1, 2, 3) and (1, 2.5, 2.5), R = (2, 4.5, 5.5), S = 6.5, T = 6
    assert V.kendalls_w([[1, 2, 3], [1.0, 5.0, 5.0]]) == pytest.approx(12 * 6.5 / (4 * 24 - 2 * 6))
    assert np.isnan(V.kendalls_w([[1, 2, 3]])) and np.isnan(V.kendalls_w([[1, np.nan], [1, 2]]))

# --- the LLM annotator's parser --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,labels,status", [
    ('{"labels": ["agrees", "terminates"]}', {"agrees", "terminates"}, "json"),
    ('Here you go:\n```json\n{"labels": ["agrees"]}\n```', {"agrees"}, "json"),
    ('{"labels": ["agrees", "cheerful"]}', {"agrees"}, "json_partial"),
    ('{"labels": []}', set(), "json"),
    ('{"labels": "nudges"}', {"nudges"}, "json"),
    ('{"labels": 7}', set(), "json"),
    ('{"label": "x"} it disagrees', {"disagrees"}, "names"),
    ('{"labels": ["agrees"', {"agrees"}, "names"),
    ("terminates_chat agreesx", set(), "unparsed"),
    ("", set(), "empty"), (None, set(), "empty"), ("   \n", set(), "empty"),
    ("{" * 20000 + "}" * 20000, set(), "unparsed"),
])
def test_parse_labels_is_lenient_and_counts(text, labels, status):
    assert V.parse_labels(text, set(V.USER_LABELS)) == (frozenset(labels), status)

def test_llm_annotate_counts_every_reply():
    replies = iter(['{"labels": ["agrees"]}', "garbage", "", 'it reveals'])
    labs, st = V.llm_annotate(lambda ps: [next(replies) for _ in ps], ["p"] * 4, set(V.USER_LABELS), batch_size=3)
    assert labs == [frozenset({"agrees"}), frozenset(), frozenset(), frozenset({"reveals"})]
    assert dict(st) == {"json": 1, "unparsed": 1, "empty": 1, "names": 1}

# --- the human-judgment kit in a real browser ------------------------------------------------------------------------

def _kit(tmp_path, n=5):
    items = tiny_items("math-chat", "eval", 3, 0)
    T = {}
    for it in items:
        for u in ("real", "sim-a", "sim-b"):
            T[("pol", u, it.item_id)] = [{"role": "user", "content": f"{len(u)} <b>opens</b> & asks about {it.item_id}"},
                                         {"role": "assistant", "content": "what is b ?"}]
    return V.human_kit(T, ["sim-a", "sim-b"], ["pol"], [it.item_id for it in items], n, tmp_path / "kit", seed=0)

def test_kit_page_is_self_contained_and_the_key_is_separate(tmp_path):
    key = _kit(tmp_path)
    page = (tmp_path / "kit" / "index.html").read_text()
    assert page.count('class="pair"') == 5 and "<script src" not in page and "http" not in page
    assert "&lt;b&gt;opens&lt;/b&gt; &amp;" in page and "sim-a" not in page          # escaped; no simulator names shown
    assert set(key["pairs"]) == {f"p{k}" for k in range(5)} and {v["simulator"] for v in key["pairs"].values()} == {"sim-a", "sim-b"}
    assert _kit(tmp_path / "again") == key                                              # seeded

def test_score_answers_on_known_answers(tmp_path):
    key = _kit(tmp_path, n=6)
    right = {p: v["real"] for p, v in key["pairs"].items()}
    flip = {p: ("B" if v == "A" else "A") for p, v in right.items()}
    mixed = {p: right[p] if v["simulator"] == "sim-a" else flip[p] for p, v in key["pairs"].items()}
    files = []
    for name, ans in (("x", right), ("y", mixed), ("x", mixed)):
        f = tmp_path / f"{name}-{len(files)}.json"; f.write_text(json.dumps(dict(kit=key["kit"], annotator=name, answers=ans))); files.append(f)
    (tmp_path / "bad.json").write_text("{not json"); (tmp_path / "other.json").write_text(json.dumps(dict(kit="other", answers={})))
    res = V.score_answers(files + [tmp_path / "bad.json", tmp_path / "other.json"], key)
    assert len(res["skipped"]) == 2 and res["n_annotators"] == 3 and res["answered"] == 18
    t = res["table"].set_index("simulator")
    assert t.loc["sim-a", "success_rate"] == 1.0 and t.loc["sim-b", "success_rate"] == pytest.approx(1 / 3)
    assert list(res["per_annotator"].index) == ["x", "x#2", "y"]
    # per annotator fool rates (sim-a, sim-b): x (0, 0) — a tie —, x#2 and y (0, 1): W with the tie correction
    assert res["kendall_w"] == pytest.approx(V.kendalls_w([[0, 0], [0, 1], [0, 1]]))

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

def _dump_dom(url:str) -> str:
    with tempfile.TemporaryDirectory() as prof:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={prof}"]
        r = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout

def test_kit_page_in_headless_chromium(tmp_path):
    if CHROMIUM is None:
        pytest.skip("SKIPPED LOUDLY: no Chromium at /usr/bin/chromium — install it (apt-get install chromium) to test the human-judgment page")
    key = _kit(tmp_path, n=4)
    page = (tmp_path / "kit" / "index.html").as_uri()
    dom = _dump_dom(page)                                                          # 1. it loads, with 4 pairs and nothing chosen
    assert dom.count('class="pair"') == 4 and dom.count('type="radio"') == 8
    assert re.search(r'<pre id="answers"></pre>', dom)
    picks = {"p0": "A", "p1": "B", "p3": "B"}                                       # 2. choices clicked, answers produced
    dom = _dump_dom(page + "?annotator=ann%201&export=1&select=" + ",".join(f"{p}:{v}" for p, v in picks.items()))
    m = re.search(r'<pre id="answers">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    answers = json.loads(html.unescape(m.group(1)))
    assert answers == dict(kit=key["kit"], annotator="ann 1", n_pairs=4, answers=picks)
    assert "3 of 4 pairs answered" in dom and 'download="answers-ann_1.json"' in dom
    f = tmp_path / "answers.json"; f.write_text(html.unescape(m.group(1)))   # 3. the scorer reads that file
    res = V.score_answers([f], key)
    assert res["answered"] == 3 and res["n_annotators"] == 1 and not res["skipped"]
    want = np.mean([picks[p] == key["pairs"][p]["real"] for p in picks])
    got = (res["table"].success_rate * res["table"].answered).sum() / res["table"].answered.sum()
    assert got == pytest.approx(want)

def test_llm_annotator_keeps_each_taxonomy_and_counts_parses(math_item):
    it, op = math_item, _opening(math_item)
    msgs = [op, {"role": "assistant", "content": "hmm"}, {"role": "user", "content": "so what is the answer ?"}, {"role": "assistant", "content": ""}]
    def gen(prompts):
        return ['{"labels": ["off_task", "agrees"]}' if "written by the ASSISTANT" in p else "nudges, I guess" for p in prompts]
    ann = V.LLMAnnotator(gen, max_history=1)
    labs, issues = ann(it, msgs)
    assert labs == [frozenset({"nudges"})] * 2 and issues == [(1, "off_task"), (3, "off_task")]
    assert dict(ann.status) == {"names": 2, "json_partial": 2}
    assert V.text_annotator(it, msgs) == ([frozenset(), frozenset({"nudges"})], [(1, "off_task"), (3, "off_task"), (3, "no_final_answer")])
