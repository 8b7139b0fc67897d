"The stand-in for pretraining in `04c`: recall texts and the words they draw on."
import random, re
import pytest
import torch
from calirl.base_policy import recall_text, recall_words
from calirl.models import train_tokenizer

WORDS = ["lamp", "sky", "cold", "red", "big", "door", "old", "warm"]
FILLER = ["how many more ?", "please fix my note .", "yes , thanks !"]

@pytest.mark.parametrize("seed", range(50))
def test_recall_text_ends_with_each_keys_latest_value(seed):
    text, val = recall_text(random.Random(seed), WORDS, FILLER)
    before, after = text.split(" : ")
    assert after == " ".join(f"the {k} {v} ." for k, v in val.items())
    for k, v in val.items():
        assert re.findall(rf"the {k} (\w+) \.", before)[-1] == v          # the last value written before the colon

def test_recall_words_are_single_tokens():
    texts = [f"the {a} {b} ." for a in WORDS for b in WORDS] + FILLER + ["3 + 4 = 7"]
    tok = train_tokenizer(texts, 300)
    words = recall_words(tok, texts)
    assert set(WORDS) <= set(words) and not {"3", "+", "=", "?"} & set(words)
    assert all(len(tok(" " + w).input_ids) == 1 for w in words)


def test_save_text_model_keeps_the_language_model(tmp_path):
    """`04c` hands the paper's multimodal policy on as a text-only folder: a causal-LM config, tensors named as the loaded
    model's parameters, each equal bit for bit to the multimodal checkpoint's language-model weight of that name."""
    import json
    from safetensors import safe_open
    from calirl.base_policy import save_text_model
    from calirl.models import TEXT_KEYS, load_model, tiny_multimodal, with_hub_template
    tok = with_hub_template(train_tokenizer(FILLER * 4 + WORDS, 300), "gemma3")
    mm = tiny_multimodal(tok, 32, 2, 0)
    mm.save_pretrained(tmp_path / "multimodal")
    tok.save_pretrained(tmp_path / "multimodal")
    save_text_model(tmp_path / "multimodal", tmp_path / "text")
    assert json.loads((tmp_path / "text" / "config.json").read_text())["architectures"] == ["Gemma3ForCausalLM"]
    model, t2 = load_model(tmp_path / "text", device="cpu", dtype="float32")          # as the trainer loads it
    with safe_open(str(tmp_path / "text" / "model.safetensors"), "pt") as f: saved = {k: f.get_tensor(k) for k in f.keys()}
    names = {n: p for n, p in model.named_parameters()}
    assert set(saved) == set(names)
    rename = lambda n: next((re.sub(k, v, n) for k, v in TEXT_KEYS.items() if re.match(k, n)), None)
    lm = {rename(n): p for n, p in mm.named_parameters() if rename(n)}
    assert set(lm) == set(names) and all(torch.equal(saved[n], lm[n]) and torch.equal(names[n], lm[n]) for n in names)
    assert t2.chat_template == tok.chat_template
