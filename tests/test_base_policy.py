"The stand-in for pretraining in `04c`: recall texts and the words they draw on."
import random, re
import pytest
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
