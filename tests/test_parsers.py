"""Fuzz: thousands of random and adversarial strings through every parser — no exception, ever."""
import json, random, string
from hypothesis import given, settings, strategies as st, HealthCheck
from calirl.prompts import Parsed, parse_judge, parse_policy, parse_user
from calirl.dialogue import has_terminal, strip_terminal
from calirl.rewards import bleu, bleu_char_nltk, Score
from calirl.dialogue import extract_answer, extract_doc

PARSERS = (parse_user, parse_policy, lambda t: parse_judge(t)[1])
STATUSES = {"ok", "repaired", "partial", "plain_text", "empty"}

def _check(text):
    for f in PARSERS:
        r = f(text)
        assert isinstance(r, Parsed) and isinstance(r.message, str) and r.status in STATUSES and isinstance(r.fields, dict)
    v, _ = parse_judge(text)
    assert v in (None, 0, 1)
    assert isinstance(has_terminal(text), bool) and isinstance(strip_terminal(text), str)
    extract_answer(text); extract_doc(text)

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4), max_leaves=12)
fieldy = st.dictionaries(st.sampled_from(["response", "thought", "current_answer", "current_problem", "accuracy", "x"]),
                         json_values, max_size=5)

@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=300))
def test_random_text_never_raises(text): _check(text)

@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(fieldy, st.integers(0, 400), st.sampled_from(["", "```json\n", "Sure: "]), st.sampled_from(["", "\n```", " trailing"]))
def test_truncated_and_wrapped_json_never_raises(d, cut, pre, post):
    s = json.dumps(d)
    _check(pre + s[:cut] + post); _check(pre + s.replace('"', "'") + post)

def test_adversarial_strings():
    rnd = random.Random(0)
    junk = ["{" * 100_000, "[" * 50_000, '{"response": ' * 5000, "\x00" * 1000, "\ud800", "}" * 1000 + "{",
            '{"response": "' + "\\" * 10_001, "```" * 3000, "{'response': " + "(" * 3000, '{"accuracy": 1e99999}',
            '{"accuracy": NaN}', "a" * 1_000_000, '{"response": "[[TERMINATE CHAT]]"}' * 100]
    for s in junk: _check(s)
    alphabet = string.printable + "{}[]\"'\\:,`éλ😀"
    for _ in range(3000): _check("".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 120))))

@settings(max_examples=300, deadline=None)
@given(st.text(max_size=100), st.text(min_size=1, max_size=100))
def test_bleu_never_raises_and_stays_in_range(h, r):
    for f in (bleu, bleu_char_nltk):
        s = f(h, r)
        assert isinstance(s, Score) and (s.value is None or 0.0 <= s.value <= 1.0)
