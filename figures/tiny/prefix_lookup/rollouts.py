"""GRPO-like rollouts against the tiny Phase I simulator, with the prefix cache's lookup entry by entry (as before
`6b6e2c9`) and as one comparison (since), in one process, alternating round by round.

Usage: python rollouts.py MODELS [N]. MODELS is a tiny run's `runs/tiny/artifacts/models/` (its `policy_base` and
`simulator_sft`). Each round of N rollouts is what one GRPO step of `09_grpo`'s calibrated variant asks for: 2 math and
2 docedit items × G 8, at most 7 rounds of 48 tokens, a fresh policy backend (the weights changed), and one simulator
that lives through all N, so its cache fills as it does in training. One BLAS thread. Both lookups must give the same
tokens: the transcripts' digests are printed and compared."""
import hashlib, json, sys, time
import numpy as np
import torch
from calirl.backends import HFBackend, PrefixCache
from calirl.components import build_lm_simulator
from calirl.models import load_model
from calirl.rollout import rollout
from calirl.tasks import load_items

def longest_by_loop(self, prompt:np.ndarray) -> tuple[int, int]:
    "The lookup before `6b6e2c9`: entry by entry, the first strictly longer common prefix wins."
    best, at, m = 0, -1, len(prompt) - 1
    for j, (toks, _, _) in enumerate(self.entries):
        n = min(m, len(toks))
        diff = np.flatnonzero(toks[:n] != prompt[:n])
        lcp = int(diff[0]) if diff.size else n
        if lcp > best: best, at = lcp, j
    return best, at

def run(models:str, n:int, lookups:dict) -> dict:
    "N rounds per lookup, alternating between them round by round (order flipped every round), each lookup with its own simulator."
    pm, ptok = load_model(f"{models}/policy_base", device="cpu", dtype="float32")
    sims = {name: build_lm_simulator(f"{models}/simulator_sft", device="cpu", dtype="float32", max_new_tokens=48, temperature=0.5)
            for name in lookups}
    math_items = load_items("tiny", "math-chat", 2000, 200)[0]
    doc_items = load_items("tiny", "docedit-chat", 2000, 200)[0]
    times = {name: [] for name in lookups}
    digests = {name: hashlib.sha256() for name in lookups}
    for s in range(n):
        items = math_items[2 * s:2 * s + 2] + doc_items[2 * s:2 * s + 2]
        for name in (list(lookups) if s % 2 == 0 else list(lookups)[::-1]):
            PrefixCache.longest = lookups[name]
            t0 = time.perf_counter()
            trs = rollout(HFBackend(pm, ptok), ptok, sims[name], items, G=8, H=7, max_new_tokens=48, temperature=1.0, seed=s, max_len=512)
            times[name].append(time.perf_counter() - t0)
            for t in trs: digests[name].update(repr((t.completion_ids, [m["content"] for m in t.messages])).encode())
    k = max(1, n // 4)
    return {name: dict(seconds=round(sum(ts), 1), first=round(sum(ts[:k]) / k, 3), last=round(sum(ts[-k:]) / k, 3),
                       entries=[len(u.backend.lean.cache.entries) for u in sims[name].users.values()], digest=digests[name].hexdigest()[:16])
            for name, ts in times.items()}

if __name__ == "__main__":
    torch.set_num_threads(1)
    models, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    one = PrefixCache.longest
    out = run(models, n, {"loop": longest_by_loop, "one comparison": one})
    for name, r in out.items():
        print(f"{name:>15}: {n} rollouts {r['seconds']} s; first {n // 4} {r['first']} s each, last {n // 4} {r['last']} s each; "
              f"cache entries at the end {r['entries']}; digest {r['digest']}")
    same = out["loop"]["digest"] == out["one comparison"]["digest"]
    print(f"same transcripts: {same}; speed-up {out['loop']['seconds'] / out['one comparison']['seconds']:.2f}x")
    print(json.dumps(dict(out, same=same)))
    sys.exit(0 if same else 1)
