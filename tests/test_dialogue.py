"""One rule for what a message means (`calirl.dialogue`), checked against the copies it replaced.

Before the dialogue module, "the answer an assistant message commits to", "does it ask", "the final answer" and "the
history prefixes" were written out in five modules. The old copies are kept below verbatim (as they were on main
before the change) and compared with the one rule on many generated conversations."""
import json
from hypothesis import given, settings, strategies as st
from calirl.dialogue import (TERMINATE, Conversation, asks, committed, extract_answer, extract_doc, final_answer,
                             has_terminal, load_conversations, prefix_ends, save_conversations, turn_kind)
from calirl.tasks import tiny_items

ITEMS = tiny_items("math-chat", "train", 3) + tiny_items("docedit-chat", "train", 3)

# --- the old copies ------------------------------------------------------------------------------------------------
def old_commit(item, text):                      # tasks.final_answer's getter, grpo._committed, validity._commit, users
    return extract_answer(text) if item.task == "math-chat" else extract_doc(text)

def old_turn_kind(item, text):                   # collabllm.turn_kind
    c = extract_answer(text) if item.task == "math-chat" else extract_doc(text)
    return "answer" if c is not None else "ask" if "?" in text else "other"

def old_assistant_asked(item, chat):             # realism.assistant_asked
    if not chat or chat[-1]["role"] != "assistant": return False
    last = chat[-1]["content"]
    return "?" in last and (extract_answer(last) if item.task == "math-chat" else extract_doc(last)) is None

def old_final_answer(item, messages):            # tasks.final_answer
    get = extract_answer if item.task == "math-chat" else extract_doc
    for m in reversed(messages):
        if m["role"] == "assistant" and (v := get(m["content"])) is not None: return v
    return None

def old_static_prefixes(messages):               # grpo.static_prompts
    return [k for k, m in enumerate(messages) if m["role"] == "user" and "[[TERMINATE CHAT]]" not in m["content"]]

def old_context_prefixes(messages, H):           # collabllm.contexts_from_traces
    out = []
    for k, m in enumerate(messages):
        n_asst = sum(x["role"] == "assistant" for x in messages[:k])
        if m["role"] == "user" and "[[TERMINATE CHAT]]" not in m["content"] and n_asst < H: out.append(k)
    return out

def old_history_prefixes(messages):              # realism.history_prefixes (turn t, prefix end k)
    out, t = [], 0
    for k, m in enumerate(messages):
        if m["role"] == "assistant": out.append((t, k)); t += 1
    return out

# --- generated messages --------------------------------------------------------------------------------------------
numbers = st.one_of(st.integers(-10**6, 10**6).map(str), st.integers(0, 10**7).map(lambda n: f"{n:,}"),
                    st.decimals(-1000, 1000, places=3, allow_nan=False).map(str),
                    st.tuples(st.integers(-50, 50), st.integers(1, 50)).map(lambda t: f"{t[0]}/{t[1]}"),
                    st.tuples(st.integers(1, 9), st.integers(-5, 5)).map(lambda t: f"{t[0]}e{t[1]}"),
                    st.sampled_from(["3x", "1,2", "x + 1", "\\frac{3}{4}", "\\sqrt{2}", "unclear", ""]))
pieces = st.one_of(
    numbers.map(lambda n: f"the answer is {n}"), numbers.map(lambda n: f"\\boxed{{{n}}}"), numbers.map(lambda n: f"answer is ${n}$ ."),
    st.sampled_from(["how many more ?", "what is the note ?", "ok", "?", "doc : the cat is red .", "doc :",
                     "doc : the dog is big . " + TERMINATE, TERMINATE, "[[ terminate chat ]]", "yes , thanks !", "so what is b"]),
    st.text(max_size=30))
texts = st.lists(pieces, min_size=1, max_size=4).map(" ".join)
chats = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), max_size=10).map(
    lambda ms: [{"role": r, "content": c} for r, c in ms])

@settings(max_examples=600, deadline=None)
@given(st.sampled_from(ITEMS), texts)
def test_committed_and_turn_kind_agree_with_the_old_copies(item, text):
    assert committed(item, text) == old_commit(item, text)
    assert turn_kind(item, text) == old_turn_kind(item, text)
    assert asks(item, text) == old_assistant_asked(item, [{"role": "assistant", "content": text}])

@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ITEMS), chats, st.integers(0, 6))
def test_final_answer_and_prefixes_agree_with_the_old_copies(item, chat, H):
    assert final_answer(item, chat) == old_final_answer(item, chat)
    ended = lambda k: has_terminal(chat[k]["content"])   # one reading of the signal; the old copies matched the exact string
    assert prefix_ends(chat) == [k for k in old_static_prefixes(chat) if not ended(k)]
    assert prefix_ends(chat, "user", H) == [k for k in old_context_prefixes(chat, H) if not ended(k)]
    assert [(t, k) for t, k in enumerate(prefix_ends(chat, "assistant"))] == old_history_prefixes(chat)

def test_the_terminal_signal_is_read_the_same_way_everywhere():
    it = ITEMS[0]
    log = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "how many ?"}, {"role": "user", "content": "bye [[ Terminate Chat ]]"}]
    assert prefix_ends(log) == [0]                     # the old copies compared the exact string and kept index 2
    assert old_static_prefixes(log) == [0, 2]
    assert committed(ITEMS[3], "doc : the cat is red . [[TERMINATE CHAT]]") == "the cat is red ."
    assert not asks(it, None) and turn_kind(it, "") == "other"

def test_the_record_round_trips_through_parquet(tmp_path):
    c = Conversation("m", "math-chat", 2, [{"role": "user", "content": "q"}], [["open", "typo"]], "terminated", ["policy_terminal"],
                     None, "", [1, 2], [3, 4], [1, 0], [-0.5, 0.0], 1, 3, 1, {"user": "scripted-human"})
    back = load_conversations(save_conversations([c, Conversation("d", "docedit-chat", reward=0.5)], tmp_path / "c.parquet"))
    assert back[0] == c and back[1].reward == 0.5 and back[1].messages == []
    assert json.loads(json.dumps(back[0].meta)) == {"user": "scripted-human"}
