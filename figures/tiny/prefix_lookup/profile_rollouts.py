"""The rounds of `rollouts.py` with today's lookup alone, to be sampled by py-spy:

    py-spy record -r 50 -f raw -o pyspy_rollouts.txt -- python profile_rollouts.py MODELS 40
    python pyspy_summary.py pyspy_rollouts.txt.gz"""
import sys, time
import torch
from calirl.backends import HFBackend
from calirl.components import build_lm_simulator
from calirl.models import load_model
from calirl.rollout import rollout
from calirl.tasks import load_items

torch.set_num_threads(1)
models, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
pm, ptok = load_model(f"{models}/policy_base", device="cpu", dtype="float32")
sim = build_lm_simulator(f"{models}/simulator_sft", device="cpu", dtype="float32", max_new_tokens=48, temperature=0.5)
math_items = load_items("tiny", "math-chat", 2000, 200)[0]
doc_items = load_items("tiny", "docedit-chat", 2000, 200)[0]
t0 = time.perf_counter()
for s in range(n):
    items = math_items[2 * s:2 * s + 2] + doc_items[2 * s:2 * s + 2]
    rollout(HFBackend(pm, ptok), ptok, sim, items, G=8, H=7, max_new_tokens=48, temperature=1.0, seed=s, max_len=512)
print(f"{n} rounds in {time.perf_counter() - t0:.1f} s")
