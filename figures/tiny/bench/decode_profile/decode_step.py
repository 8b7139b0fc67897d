"""One batched decode step of the tiny policy (hidden 128, 2 layers, vocab 1024) on the lean decoder, one BLAS thread:
the whole `generate` call (64 prompts of 120-126 tokens, 32 new tokens, prefill included), one forward step alone,
sampling alone, and torch.profiler's table of the forward step's operators. Run: `python decode_step.py`."""
import time, torch
torch.set_num_threads(1)
from calirl.models import tiny_config
from calirl.backends import LeanDecoder
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
m = AutoModelForCausalLM.from_config(tiny_config(eos_token_id=1, pad_token_id=0)).eval()
print("parameters:", sum(p.numel() for p in m.parameters()))
dec = LeanDecoder(m)
B, P, N = 64, 120, 32
prompts = [list(torch.randint(2, 1024, (P + (i % 7),)).tolist()) for i in range(B)]
for rep in range(3):
    dec = LeanDecoder(m)
    t = time.perf_counter(); new, raw = dec.generate(prompts, N, 1.0, 1.0, [1], 0, compact=False); dt = time.perf_counter() - t
    print(f"B={B} N={N}: generate {dt:.3f} s, {B*N/dt:.0f} tok/s ({dt/N*1e3:.2f} ms per new token position, the prefill included)")
# the prefill alone, then one decode forward alone
dec = LeanDecoder(m)   # an empty prefix cache: every prompt token is prefilled
with torch.no_grad():
    t = time.perf_counter(); z, K, V, keys, last, layout = dec._prefill(prompts, N); print(f"prefill of the 64 prompts alone: {time.perf_counter() - t:.3f} s")
C, S = layout[2], layout[3]
nxt = torch.randint(2, 1024, (B,))
at = C + S
keys[:, at] = True
with torch.no_grad():
    for _ in range(5): dec.forward(nxt[:, None], last + 1, K, V, slice(at, at + 1), keys[:, None, None, :at + 1])
    t = time.perf_counter()
    for _ in range(50): dec.forward(nxt[:, None], last + 1, K, V, slice(at, at + 1), keys[:, None, None, :at + 1])
    print(f"forward only: {(time.perf_counter()-t)/50*1e3:.2f} ms")
    from calirl.backends import sample_next
    t = time.perf_counter()
    for _ in range(50): sample_next(z.float(), 1.0, 1.0, torch.rand(B, 1, dtype=torch.float64))
    print(f"sample only: {(time.perf_counter()-t)/50*1e3:.2f} ms")
    from torch.profiler import profile
    with profile() as p:
        for _ in range(20): dec.forward(nxt[:, None], last + 1, K, V, slice(at, at + 1), keys[:, None, None, :at + 1])
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
