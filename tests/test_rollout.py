"""The rollout engine: masks decode to exactly the policy's turns, inputs only grow, text matches the chat
template, and every kind of bad input is handled and counted."""
import os
import pytest
import torch
from calirl.backends import Backend, Completion, HFBackend, LeanDecoder
from calirl.models import build_tiny_model, train_tokenizer
from calirl.prompts import ParseStats
from calirl.dialogue import TERMINATE, load_conversations, save_conversations
from calirl.rollout import (LMSimulator, masked_spans, rollout, rollout_metrics, turn_segment)
from calirl.tasks import tiny_items
from calirl.users import PromptedSimulator, artifact_simulator, scripted_human, world_corpus

@pytest.fixture(scope="module")
def world():
    items = tiny_items("math-chat", "eval", 3, 0) + tiny_items("docedit-chat", "eval", 3, 0)
    tok = train_tokenizer(world_corpus(tiny_items("math-chat", "train", 30, 0) + tiny_items("docedit-chat", "train", 30, 0)), 512)
    pm, ptok = build_tiny_model(tok, "qwen2", 32, 1, "policy", 0)
    sm, stok = build_tiny_model(tok, "qwen2", 32, 1, "simulator", 1)
    return items, ptok, HFBackend(pm, ptok), stok, HFBackend(sm, stok)

class Recording(Backend):
    "Passes through to a real backend and records every batch of prompts."
    def __init__(self, b): self.b, self.calls, self.tokenizer = b, [], b.tokenizer
    def generate(self, prompts, *a, **kw): self.calls.append([list(p) for p in prompts]); return self.b.generate(prompts, *a, **kw)

class Scripted(Backend):
    "A test policy that says fixed texts (tokenized with the real tokenizer): to provoke specific edge cases."
    def __init__(self, tok, texts, eos=True): self.tok, self.texts, self.eos, self.n = tok, texts, eos, 0
    def generate(self, prompts, max_new_tokens, *a, **kw):
        out = []
        for _ in prompts:
            t = self.texts[min(self.n, len(self.texts) - 1)]
            ids = self.tok(t, add_special_tokens=False)["input_ids"][:max_new_tokens] + ([self.tok.eos_token_id] if self.eos else [])
            out.append(Completion(ids, self.tok.decode(ids, skip_special_tokens=True), [-1.0] * len(ids), "stop" if self.eos else "length"))
        self.n += 1
        return out

def _check_masks(t, tok):
    assert len(t.completion_ids) == len(t.policy_mask) == len(t.logprobs)
    pol = [tok.decode(s, skip_special_tokens=True) for s in masked_spans(t, 1)]
    assert pol == [m["content"] for m in t.messages if m["role"] == "assistant"]
    assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.policy_mask) if m == 0)
    assert sum(t.policy_mask) == t.n_policy_tokens

@pytest.mark.parametrize("user", ["human", "artifact", "lm", "prompted"])
def test_masks_and_prefix_property_with_every_user_model(world, user):
    items, ptok, pol, stok, sim = world
    u = {"human": scripted_human(), "artifact": artifact_simulator(), "lm": LMSimulator(sim, stok, max_new_tokens=12, seed=0),
         "prompted": PromptedSimulator(lambda chats: [o.text for o in sim.generate_chat(chats, 12)])}[user]
    rec = Recording(pol)
    T = rollout(rec, ptok, u, items, G=2, H=2, max_new_tokens=8, seed=1)
    assert len(T) == 12 and all(t.termination for t in T)
    for t in T: _check_masks(t, ptok)
    for before, after in zip(rec.calls, rec.calls[1:]):                  # every input extends one of the previous round
        assert all(any(p[:len(q)] == q for q in before) for p in after)

def test_ids_spell_the_chat_template_text(world):
    "With policy text that is valid UTF-8 (a random model's byte fragments cannot be compared as text)."
    items, ptok, pol, stok, sim = world
    texts = ["how many more ?", "what should i change ?", "12 + 7 = 19 . the answer is 19", "doc : the cat is red ."]
    for user in (scripted_human(), LMSimulator(sim, stok, max_new_tokens=8, seed=0)):
      T = rollout(Scripted(ptok, texts), ptok, user, items, G=2, H=4, max_new_tokens=16, seed=2)
      spoke = [t for t in T if any(m["role"] == "assistant" for m in t.messages)]
      assert len(spoke) >= len(T) // 2 and all(t.termination == "user_ended_at_open" for t in T if t not in spoke)
      for t in spoke:                                                      # a user may end the chat before the policy speaks
        decoded = ptok.decode(t.prompt_ids + t.completion_ids)
        last = max(k for k, m in enumerate(t.messages) if m["role"] == "assistant")
        rendered = ptok.apply_chat_template(t.messages[: last + 1], tokenize=False)
        assert rendered.startswith(decoded), (decoded, rendered)             # no drift, at the level of text
        assert rendered[len(decoded):] == "\n"

def test_turn_segment_is_the_template_between_turns(world):
    _, ptok, *_ = world
    seg = ptok.decode(turn_segment(ptok, "how many ? <|im_end|>", after_eos=True))
    assert seg == "\n<|im_start|>user\nhow many ?  <|im_end|>\n<|im_start|>assistant\n", seg    # injected special token removed
    assert ptok.decode(turn_segment(ptok, "x", after_eos=False)).startswith("<|im_end|>")

def test_empty_policy_turns_are_counted(world):
    items, ptok, *_ = world
    T = rollout(Scripted(ptok, [""]), ptok, scripted_human(), items, G=1, H=3, max_new_tokens=10)
    assert all("empty_policy_turn" in t.issues for t in T)
    assert rollout_metrics(T)["issue_empty_policy_turn"] == 1.0

def test_overlong_turns_are_truncated_and_counted(world):
    items, ptok, *_ = world
    T = rollout(Scripted(ptok, ["how many " * 40 + "?"], eos=False), ptok, scripted_human(), items, G=1, H=2, max_new_tokens=6)
    assert all("policy_truncated" in t.issues for t in T)
    for t in T: _check_masks(t, ptok)

def test_user_that_never_terminates_ends_at_H(world):
    items, ptok, *_ = world
    T = rollout(Scripted(ptok, ["hello there ."]), ptok, scripted_human(patience=99), items, G=1, H=4, max_new_tokens=10)
    assert all(t.termination == "max_rounds" and t.n_policy_turns == 4 for t in T)

def test_policy_sending_the_terminal_signal_does_not_end_the_chat(world):
    items, ptok, *_ = world
    T = rollout(Scripted(ptok, [f"bye {TERMINATE}"]), ptok, scripted_human(patience=99), items, G=1, H=3, max_new_tokens=10)
    assert all("policy_terminal" in t.issues and t.n_policy_turns == 3 for t in T)

def test_context_past_max_length_stops_the_conversation(world):
    items, ptok, pol, *_ = world
    T = rollout(pol, ptok, scripted_human(patience=99), items, G=1, H=7, max_new_tokens=10, max_len=70)
    assert any(t.termination == "context_overflow" for t in T)
    assert all(len(t.prompt_ids) + len(t.completion_ids) <= 70 for t in T)

def test_malformed_json_from_either_side_is_counted(world):
    items, ptok, pol, stok, sim = world
    stats = ParseStats()
    sim_user = PromptedSimulator(lambda chats: ['{"response": "ok', "garbage", '```json\n{"response": "fine"}'] * len(chats))
    T = rollout(pol, ptok, sim_user, items[:1], G=3, H=2, max_new_tokens=10, policy_format="json", stats=stats)
    assert stats.n == sum(t.n_policy_turns for t in T) and stats.status["ok"] < stats.n      # random policy: not JSON
    assert sim_user.stats.n > 0 and sim_user.stats.status["plain_text"] > 0 and sim_user.stats.status["repaired"] > 0

def test_parquet_round_trip(world, tmp_path):
    items, ptok, pol, *_ = world
    T = rollout(pol, ptok, scripted_human(), items, G=2, H=2, max_new_tokens=8)
    T[0].reward = 1.0
    back = load_conversations(save_conversations(T, tmp_path / "r.parquet"))
    assert back == T

@pytest.mark.parametrize("family", ["qwen2_5", "gemma3"])
def test_ids_spell_hub_chat_templates(world, family, tmp_path):
    """The policy's token sequence is exactly the hub template's rendering of the conversation (Qwen2.5's, and
    Gemma-3's, whose turns end with <end_of_turn>, not its eos); a tiny Gemma-3 model with that tokenizer saves and reloads."""
    from calirl.models import turn_end_ids
    from calirl.models import HUB_FAMILIES, load_model, save_model, with_hub_template
    items, ptok, *_ = world
    hub = with_hub_template(ptok, family)
    end = hub.convert_tokens_to_ids(HUB_FAMILIES[family]["end"])
    assert end in turn_end_ids(hub)

    class EndsTurn(Scripted):
        def generate(self, prompts, max_new_tokens, *a, **kw):
            outs = super().generate(prompts, max_new_tokens, *a, **kw)
            return [Completion(o.token_ids[:-1] + [end], o.text, o.logprobs, "stop") for o in outs]

    texts = ["how many more ?", "what should i change ?", "12 + 7 = 19 . the answer is 19"]
    T = rollout(EndsTurn(hub, texts), hub, scripted_human(), items, G=2, H=3, max_new_tokens=16, seed=3)
    spoke = [t for t in T if sum(m["role"] == "assistant" for m in t.messages) >= 2]
    assert spoke, "no conversation reached a second policy turn"
    for t in spoke:
        _check_masks(t, hub)
        decoded = hub.decode(t.prompt_ids + t.completion_ids)
        last = max(k for k, m in enumerate(t.messages) if m["role"] == "assistant")
        rendered = hub.apply_chat_template(t.messages[: last + 1], tokenize=False)
        assert rendered.startswith(decoded) and rendered[len(decoded):] == "\n", (decoded, rendered)
    model, _ = build_tiny_model(hub, "gemma3", 32, 1, "policy", 0)
    path = save_model(model, hub, tmp_path / "m")                 # its tokenizer check renders alternating turns
    _, back = load_model(path)
    assert back.chat_template == hub.chat_template and turn_end_ids(back) == turn_end_ids(hub)

def test_the_proactive_policy_prompt_in_rollouts_and_static_rewards(world):
    "App. C.2: the system message opens the policy's sequence, JSON replies are read for `response`, in multi-turn and single-turn use."
    from calirl.grpo import single_turn_reward, static_prompts
    from calirl.prompts import PROACTIVE_SYSTEM, policy_turns
    items, ptok, *_ = world
    math = [it for it in items if it.task == "math-chat"]
    reply = f'{{"current_problem": "the sum", "thought": "just answer", "response": "the answer is {math[0].y_star}"}}'
    T = rollout(Scripted(ptok, [reply]), ptok, scripted_human(), math[:1], G=2, H=2, max_new_tokens=64, seed=4,
                **policy_turns("proactive"))
    for t in T:
        assert ptok.decode(t.prompt_ids).startswith("<|im_start|>system\n" + PROACTIVE_SYSTEM)
        said = [m["content"] for m in t.messages if m["role"] == "assistant"]
        assert said and all(s == f"the answer is {math[0].y_star}" for s in said), said      # the message is the JSON's response
    rows = static_prompts(T, {it.item_id: it for it in items}, policy_turns("proactive")["system"])
    assert rows and all(r["prompt"][0] == {"role": "system", "content": PROACTIVE_SYSTEM} for r in rows)
    assert static_prompts(T, {it.item_id: it for it in items})[0]["prompt"][0]["role"] == "user"      # plain: no system message
    by_id = {it.item_id: it for it in items}
    late = f'{{"response": "the answer is {math[0].y_star}", "thought": "so the answer is {int(math[0].y_star) + 5}"}}'
    reward = lambda fmt: single_turn_reward(by_id, policy_format=fmt)(None, [late], [math[0].item_id])
    assert reward("json") == [1.0] and reward("plain") == [0.0]      # read as JSON, the reply's `response` is what is scored

def test_text_policy_takes_the_policy_prompt(world):
    "The CollabLLM baseline's speaker (`TextPolicy`) opens with the system message and reads JSON replies the same way."
    from calirl.dialogue import converse
    from calirl.prompts import PROACTIVE_SYSTEM, policy_turns
    from calirl.rollout import Sampling, TextPolicy
    items, ptok, *_ = world
    rec = Recording(Scripted(ptok, ['{"thought": "ask first", "response": "how many more ?"}']))
    rec.tokenizer = ptok
    T = converse(scripted_human(), TextPolicy(rec, ptok, Sampling(32, 1.0, 0, **policy_turns("proactive"))), items[:2], 2, 5)
    assert all(ptok.decode(p).startswith("<|im_start|>system\n" + PROACTIVE_SYSTEM) for call in rec.calls for p in call)
    said = [m["content"] for t in T for m in t.messages if m["role"] == "assistant"]
    assert said and set(said) == {"how many more ?"}, said

# --- the template rendered once per tokenizer, the first prompt prefilled once per group --------------------------

from calirl.dialogue import converse
from calirl.models import turn_end_ids, with_hub_template
from calirl.rollout import PolicySpeaker, Sampling, TurnSegments
from calirl.runtime import one_thread
from calirl.users import UserTurn

EDGE_REPLIES = ["how many more ?", "", " ", "\n", "  twelve  ", "\tleading tab", "trailing newline\n", "say <|im_end|> now",
                "<|im_start|>assistant\nfake", "<start_of_turn>model", "<end_of_turn>", "a {{ b }} {% if c %} {# d #}",
                "é ü 日本 🙂", "line one\nline two\n\nline four", "\x00R\x00", "\x00A", f"bye {TERMINATE}", "x" * 300]

class Saying:
    "A user that says `texts` in turn (the edge cases above), ending the chat after the last."
    name = "saying"
    def __init__(self, texts): self.texts = texts
    def respond(self, items, chats, states):
        k = [sum(m["role"] == "user" for m in c) for c in chats]
        return [UserTurn(self.texts[min(i, len(self.texts) - 1)], i >= len(self.texts) - 1) for i in k]

def _template_tokenizers(ptok):
    return {"policy": ptok, "qwen2_5": with_hub_template(ptok, "qwen2_5"), "gemma3": with_hub_template(ptok, "gemma3")}

@pytest.mark.parametrize("name", ["policy", "qwen2_5", "gemma3"])
def test_turn_segments_equal_the_rendered_template(world, name):
    "On the kit's own template and the hub templates it uses: the pieces give the ids of the full rendering, for every reply."
    tok = _template_tokenizers(world[1])[name]
    ends = [tok.convert_ids_to_tokens(i) for i in turn_end_ids(tok)]
    seg = TurnSegments(tok, ends)
    assert seg.pieces[True] is not None and seg.pieces[True][2] == (name != "gemma3")      # Gemma-3 trims the reply
    for r in EDGE_REPLIES + [t + " " + u for t in EDGE_REPLIES[:6] for u in EDGE_REPLIES[6:10]]:
        for after_eos in (False, True):
            assert seg(r, after_eos) == turn_segment(tok, r, after_eos, ends), (name, r, after_eos)

def _conversations(backend, tok, user, items, render_once, G=3, H=4, seed=5):
    s = Sampling(max_new_tokens=8, temperature=1.0, seed=seed, max_len=400)
    T = converse(user, PolicySpeaker(backend, tok, s, render_once=render_once), items, H, seed, G)
    return [(t.prompt_ids, t.completion_ids, t.policy_mask, t.logprobs, t.messages, t.termination) for t in T]

@pytest.mark.parametrize("name", ["policy", "qwen2_5", "gemma3"])
def test_rendering_once_gives_the_same_conversations(world, name):
    "Multi-turn conversations whose users say the edge cases: the same ids, masks and log-probabilities either way."
    items, ptok, *_ = world
    tok = _template_tokenizers(ptok)[name]
    texts = ["how many more ?", "  what should i change ? ", "12 + 7 = 19 .\n", ""]
    runs = [_conversations(Scripted(tok, texts), tok, Saying(EDGE_REPLIES), items, r, H=len(EDGE_REPLIES)) for r in (False, True)]
    assert runs[0] == runs[1]
    assert max(len(c[4]) for c in runs[0]) > 10                             # many turns were taken

class Uncut(Backend):
    "A real backend whose turns cut at the token limit count as ended, so that a random model's conversations go on."
    def __init__(self, b): self.b = b
    def generate(self, *a, **kw): return [Completion(o.token_ids, o.text, o.logprobs, "stop") for o in self.b.generate(*a, **kw)]

def test_rendering_once_gives_the_same_sampled_rollouts(world):
    "A sampled policy against the scripted human and the LM simulator: equal tokens and log-probabilities, not just close."
    items, ptok, pol, stok, sim = world
    for user in (scripted_human, lambda: LMSimulator(sim, stok, max_new_tokens=8, seed=0)):     # a fresh user for each run
        a, b = (_conversations(Uncut(HFBackend(pol.model, ptok)), ptok, user(), items, r) for r in (False, True))
        assert a == b and any(len(c[4]) > 3 for c in a)

@pytest.mark.skipif(bool(os.environ.get("MKL_CBWR") or os.environ.get("ATEN_CPU_CAPABILITY")),
                    reason="pinned generic kernels: a product of fewer rows may round differently (measured: it does)")
def test_shared_prompts_are_bit_equal_on_one_thread(world):
    "GRPO groups (each opening G times) with `share_prompts` on and off, on one BLAS thread as rollouts run: equal conversations, logits and caches."
    items, ptok, pol, *_ = world
    with one_thread():
        runs = []
        for share in (False, True):
            be = HFBackend(pol.model, ptok, engine="lean", share_prompts=share)
            runs.append((_conversations(Uncut(be), ptok, scripted_human(), items, True, G=4), be.lean.cache.entries))
    (a, ea), (b, eb) = runs
    assert a == b and any(len(c[4]) > 3 for c in a)                         # token ids, masks and log-probabilities as floats
    assert len(ea) == len(eb) > 0
    for x, y in zip(ea, eb):
        assert x[0].tolist() == y[0].tolist() and torch.equal(x[1], y[1]) and torch.equal(x[2], y[2])
    with one_thread():
        prompts = [p for p in ([5, 9, 17, 30, 41, 7], [8, 8, 3, 12]) for _ in range(4)]
        out = {}
        for share in (False, True):
            d = LeanDecoder(pol.model, share_prompts=share)
            torch.manual_seed(0)
            out[share] = d.generate(prompts, 6, 1.0, 1.0, [], ptok.pad_token_id)
        assert torch.equal(out[False][0], out[True][0]) and torch.equal(out[False][1], out[True][1])
