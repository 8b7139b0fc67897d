"""Math answers are read as written and compared by exact value; math-verify stays reliable on a busy machine."""
import multiprocessing as mp
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from fractions import Fraction
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
import calirl.rewards as R
from calirl.rewards import Score, Verifier, task_reward, unscorable
from calirl.tasks import TaskItem, tiny_items
from calirl.dialogue import answer_value, extract_answer, extract_doc
from calirl.users import scripted_human

# ---------------------------------------------------------------- math-verify under load

def _burn():
    while True: pass

@contextmanager
def burners(n=2):
    "`n` processes spinning on the CPU beside the test (a busy laptop), killed afterwards."
    ps = [mp.get_context("fork").Process(target=_burn, daemon=True) for _ in range(n)]
    for p in ps: p.start()
    try: yield
    finally:
        for p in ps: p.kill()
        for p in ps: p.join()

def _mv_case(k):
    "A (pred, gold, right) triple that only math-verify can decide (no plain number on the prediction side)."
    return (f"$\\sqrt{{{k * k}}}$", str(k), True) if k % 2 else (f"$\\frac{{\\sqrt{{{k * k}}}}}{{2}}$", str(k), False)

def test_200_verifications_beside_two_cpu_burners_are_all_scored():
    v = Verifier(timeout_s=1.0)
    with burners():
        got = [(v(p, g), right) for p, g, right in map(_mv_case, range(1, 201))]
    v.close()
    assert [s.status for s, _ in got if not s.scorable] == []
    assert all(s.value == float(right) for s, right in got)

def test_after_a_timeout_the_next_call_is_scored():
    v = Verifier(timeout_s=1.0)
    with burners():
        f = v._executor().submit(R._sleep_forever)
        with pytest.raises(FutureTimeout): f.result(timeout=v.timeout_s)
        v._reset()
        assert v("$\\sqrt{4}$", "2") == Score(1.0)
    v.close()

def test_a_comparison_that_never_returns_is_unscorable_and_the_next_is_scored():
    v = Verifier(timeout_s=1.0, fn=R._sleep_forever)
    assert v("\\sqrt{4}", "2") == unscorable("timeout")
    v.fn = R._mv_verify
    assert [v("\\sqrt{4}", "2"), v("\\sqrt{9}", "2")] == [Score(1.0), Score(0.0)]
    v.close()

# ---------------------------------------------------------------- answers read as written

@pytest.mark.parametrize("text,want", [
    ("the answer is 3.5", "3.5"), ("the answer is 12.5 apples", "12.5"), ("the answer is 1/2", "1/2"),
    ("the answer is 2e5", "2e5"), ("the answer is 1,000", "1000"), ("the answer is 12 .", "12"), ("the answer is 12.", "12"),
    ("3 + 9 = 12 . the answer is 12 .", "12"), ("so 3 - 5 = -2 , the answer is -2 . or the answer is 4", "4"),
    ("the answer is -3/4 .", "-3/4"), ("the answer is \\boxed{\\frac{3}{4}} .", "\\frac{3}{4}"), ("so \\boxed{1,000}", "1000"),
    ("the answer is 3x", None), ("the answer is unclear .", None), ("what is b ?", None)])
def test_extract_answer_reads_the_whole_answer(text, want):
    assert extract_answer(text) == want

def _math_item(gold):
    return TaskItem("math-chat", "t", "how many ?", gold, {"op": "add"})

@pytest.mark.parametrize("reply,gold,want", [
    ("the answer is 3.5", "3", 0.0), ("the answer is 12.5 apples", "12", 0.0), ("the answer is 1/2", "1", 0.0),
    ("the answer is 2e5", "2", 0.0), ("the answer is 2e5", "200000", 1.0), ("the answer is 1,000", "1", 0.0),
    ("the answer is 1,000", "1000", 1.0), ("the answer is 0.5 .", "1/2", 1.0), ("so \\boxed{\\sqrt{4}} .", "2", 1.0)])
def test_task_reward_compares_what_was_written(reply, gold, want):
    assert task_reward(_math_item(gold), [{"role": "assistant", "content": reply}]) == Score(want)

def test_an_unreadable_gold_is_unscorable_not_zero():
    v = Verifier(timeout_s=30)
    assert [v("3", g) for g in ("", None, "no answer here")] == [unscorable("gold")] * 3
    assert v("3", "3") == Score(1.0) and v(None, "3") == Score(0.0)
    v.close()

def test_the_scripted_human_judges_a_math_answer_by_its_value():
    it = next(i for i in tiny_items("math-chat", "eval", 50, seed=0) if int(i.y_star) > 1)
    def reply(text):
        u, st_ = scripted_human(typo_rate=0.0, early_stop=0.0, leak=0.0), {"seed": "v"}
        chat = [{"role": "user", "content": u.respond([it], [[]], [st_])[0].text}, {"role": "assistant", "content": text}]
        return u.respond([it], [chat], [st_])[0].acts
    assert "accept" in reply(f"the answer is {it.y_star}.0 .")
    assert "accept" not in reply(f"the answer is {it.y_star}.5 .")

# ---------------------------------------------------------------- property: correct exactly when the values are equal

def _exact_decimal(v: Fraction) -> str | None:
    "`v` as an exact decimal string, if it has one."
    k = next((k for k in range(80) if 10**k % v.denominator == 0), None)
    if k is None: return None
    s = str(abs(v.numerator) * 10**k // v.denominator).rjust(k + 1, "0")
    return ("-" if v < 0 else "") + (f"{s[:-k]}.{s[-k:]}" if k else s)

def _writings(v: Fraction) -> list[str]:
    "Ways to write exactly `v`: fractions, \\frac, integers with separators, decimals, scientific notation."
    sign, a = ("-" if v < 0 else ""), abs(v)
    out = [f"{sign}{a.numerator}/{a.denominator}", f"{sign}\\frac{{{a.numerator}}}{{{a.denominator}}}"]
    if a.denominator == 1: out += [str(int(v)), f"{int(v):,}", f"{int(v)}.0", f"{int(v)}e0", f"{int(v) * 10}e-1"]
    if (d := _exact_decimal(v)) is not None:
        ip, _, fp = d.lstrip("-").partition(".")
        out += [d, f"{sign}{int(ip):,}" + (f".{fp}" if fp else ""), f"{sign}{int(ip + fp)}e{-len(fp)}"]
    return out

values = st.one_of(
    st.integers(-10**30, 10**30),                                                            # ints, negative, big
    st.builds(lambda m, k: Fraction(m, 10**k), st.integers(-10**12, 10**12), st.integers(0, 12)),   # decimals
    st.fractions(max_denominator=10**6),                                                     # fractions
    st.builds(lambda m, e: Fraction(m) * Fraction(10) ** e, st.integers(-999, 999), st.integers(-40, 40)))  # sci
FORMATS = ("the answer is {}", "the answer is {} apples .", "the answer is {}.", "so \\boxed{{{}}} .",
           "the answer is: {} !", "1 + 1 = 2 . the answer is {} .", "the answer is ${}$ .")

@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(values, values, st.booleans(), st.data())
def test_scored_correct_exactly_when_the_values_are_equal(g, other, same, data):
    p = g if same else data.draw(st.sampled_from([other, g + Fraction(1, 10**12), g - 1, -g if g else Fraction(1)]))
    gold = data.draw(st.sampled_from(_writings(g)))
    pred = data.draw(st.sampled_from(_writings(p)))
    reply = data.draw(st.sampled_from(FORMATS)).format(pred)
    assert answer_value(extract_answer(reply)) == p, (reply, extract_answer(reply))
    s = task_reward(_math_item(gold), [{"role": "assistant", "content": reply}])
    assert s == Score(float(p == g)), (reply, gold, s)

@settings(max_examples=300, deadline=None)
@given(values)
def test_every_writing_has_its_exact_value(v):
    assert {answer_value(w) for w in _writings(v)} == {v}

# ---------------------------------------------------------------- extract_* never raise, whatever they are given

anything = st.one_of(st.text(), st.binary(), st.none(), st.integers(), st.floats(), st.fractions(), st.lists(st.text(max_size=5)),
                     st.dictionaries(st.text(max_size=5), st.integers()), st.from_type(type).flatmap(st.from_type))

@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(anything)
def test_extractors_never_raise(x):
    for f in (extract_answer, extract_doc):
        assert f(x) is None or (isinstance(x, str) and isinstance(f(x), str))
    assert answer_value(x) is None or isinstance(answer_value(x), Fraction)

@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789.,/-+eE$\\{}() answerisboxdfrac", max_size=60))
def test_extractors_never_raise_on_number_like_text(s):
    for t in (s, "the answer is " + s, "\\boxed{" + s):
        a = extract_answer(t)
        assert a is None or isinstance(a, str)
        assert answer_value(a) is None or isinstance(answer_value(a), Fraction)


def test_every_judge_of_a_committed_answer_compares_values():
    "The scripted human, the reward-hacking probe and the issue annotator agree with the reward on '12.0' vs '12'."
    from calirl.grpo import hack_flags
    from calirl.validity import assistant_issues
    from calirl.dialogue import is_right
    item = next(it for it in tiny_items("math-chat", "eval", 50, seed=0) if "." not in it.y_star)
    for written, right in ((f"{item.y_star}.0", True), (f"{int(item.y_star):,}.00", True), (f"{item.y_star}.5", False)):
        msgs = [{"role": "user", "content": item.x}, {"role": "assistant", "content": f"the answer is {written} ."},
                {"role": "user", "content": "yes , thanks ! [[TERMINATE CHAT]]"}]
        assert is_right(item, extract_answer(msgs[1]["content"])) is right
        assert task_reward(item, msgs).value == float(right)
        assert hack_flags(item, msgs, [[], []])["accept_wrong"] is (not right)
        assert any(i == "premature_answer" or i == "ignores_information" for _, i in assistant_issues(item, msgs)) is (not right)
