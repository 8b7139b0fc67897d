"""Where a GRPO step's time goes, and how much of its optimizer pass is padding (tiny profile, after a tiny run). Usage, from the project root: python figures/tiny/grpo_padding/grpo_padding.py [root] | grep -v '^{' > figures/tiny/grpo_padding/output.txt (the trainer logs to stdout too). On one BLAS thread, as a GRPO worker runs: (1) 8 GRPO steps of the oracle variant from the base policy, split by phase (`calirl.grpo.BENCH_PHASES`: decoding, the rest of the conversation loop, scoring, forward, backward, the rest of the optimizer step); (2) on 6 batches per task of the trained oracle policy against the scripted human (4 prompts × G 8), the share of real tokens in one padded batch as TRL builds it and in length-sorted chunks of 8 trimmed to their own length, and the forward + backward time of the policy on each layout, with the largest gradient difference; (3) on the same batches, the time of TRL's own `compute_loss` and backward pass in a `GRPOTrainer`, as one padded batch (`grpo_chunk` = 0) and with `use_length_chunks` (`grpo_chunk` = 8), interleaved three times each, with the largest loss and gradient differences."""
import dataclasses, os, random, statistics, sys, tempfile, time
from pathlib import Path
from types import SimpleNamespace
import torch
from transformers import TrainerCallback
from calirl.core import GRPOSettings, PHASES, PerTask, load_profile, model_source
from calirl.components import make_user, user_spec
from calirl.grpo import BENCH_PHASES, grpo_config, interactive_rollout_func, train_grpo, transcript_reward, use_length_chunks
from calirl.models import load_model
from calirl.tasks import load_items
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(1)
root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
run = str(root / "runs" / "tiny")
prof = load_profile("tiny", root / "settings.ini")
g = {f.name: getattr(prof, f.name) for f in dataclasses.fields(prof)}
items = {it.item_id: it for task in g["tasks"] for it in load_items(g["world"], task, g["n_train_items"], g["n_eval_items"], g["seed"], "", "")[0]}
settings = GRPOSettings.of(g)
max_len = PerTask.of(g, "max_len")
oracle = make_user(**user_spec("oracle", g, run))

# (1) GRPO steps of the oracle variant, split by phase
pol, tok = load_model(model_source(run, "policy_base"))
marks = []
class Mark(TrainerCallback):
    def on_step_end(self, *a, **k): marks.append((time.perf_counter(), dict(PHASES)))
rows = [{"prompt": i, "task": it.task} for i, it in items.items()]
cfg = grpo_config(tempfile.mkdtemp(), 9, settings, save_steps=10**6)
rf = interactive_rollout_func(oracle, items, tok, g["H"], settings, max_len)
train_grpo(pol, tok, rows, transcript_reward(items), cfg, rollout_func=rf, resume=False, callbacks=[Mark()])
(t0, p0), (t1, p1) = marks[0], marks[-1]
n = len(marks) - 1
split = {k: round((p1.get(k, 0.0) - p0.get(k, 0.0)) / n, 3) for k in BENCH_PHASES}
print(f"oracle variant, {n} GRPO steps after the first: {(t1 - t0) / n:.3f} s per step; per step by phase: {split}; rest {(t1 - t0) / n - sum(split.values()):.3f}")

# (2) padding in the optimizer's pass
pol, tok = load_model(model_source(run, "policy_oracle"))
rf = interactive_rollout_func(oracle, items, tok, g["H"], settings, max_len)
pad = tok.pad_token_id

def padded(P, C):
    "Left-padded prompts and right-padded completions in one batch, as TRL lays them out."
    Pm, Cm = max(map(len, P)), max(map(len, C))
    ids = torch.full((len(P), Pm + Cm), pad)
    att = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(P, C)):
        ids[i, Pm - len(p):Pm + len(c)] = torch.tensor(p + c)
        att[i, Pm - len(p):Pm + len(c)] = 1
    return ids, att, Cm

def forward_backward(P, C) -> float:
    "Summed log-probability of the completions (a GRPO-like loss), backward; the loss."
    ids, att, Cm = padded(P, C)
    logits = pol(input_ids=ids, attention_mask=att).logits[:, -Cm - 1:-1]
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -Cm:, None]).squeeze(-1)
    loss = -(lp * att[:, -Cm:].float()).sum() / 10_000
    loss.backward()
    return loss.item()

def trl_loss_backward(P, C, E, reps:int=3) -> tuple[list, list, float, float]:
    "Seconds of TRL's compute_loss + backward on one batch, padded and in chunks of 8 (`reps` each, interleaved); the largest loss and gradient differences."
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    R = [float(k % 3) for k in range(len(P))]                 # rewards that differ within every group
    def reward(prompts, completions, R, **kw): return list(R)
    with tempfile.TemporaryDirectory() as d:
        cfg = GRPOConfig(output_dir=d, per_device_train_batch_size=len(P), num_generations=8, max_steps=1, beta=0.0, loss_type="dapo",
                         scale_rewards="group", bf16=False, use_cpu=True, report_to="none", seed=0)
        rows = [{"prompt": f"p{k // 8}"} for k in range(len(P))]
        tr = GRPOTrainer(model=pol, processing_class=tok, reward_funcs=reward, args=cfg, train_dataset=Dataset.from_list(rows),
                         rollout_func=lambda prompts, trainer: dict(prompt_ids=P, completion_ids=C, env_mask=E, R=R, logprobs=None))
        pol.train()
        tr.current_gradient_accumulation_steps = 1
        out = tr._generate_and_score_completions(rows)
        whole = tr._get_per_token_logps_and_entropies
        secs, loss, grads = {0: [], 8: []}, {}, {}
        for _ in range(reps):
            for c in (0, 8):
                tr._get_per_token_logps_and_entropies = whole
                if c: use_length_chunks(tr, c)
                pol.zero_grad()
                t = time.perf_counter()
                l = tr.compute_loss(pol, out)
                l.backward()
                secs[c].append(time.perf_counter() - t)
                loss[c], grads[c] = l.item(), [p.grad.clone() for p in pol.parameters()]
    pol.zero_grad()
    return secs[0], secs[8], abs(loss[0] - loss[8]), max((a - b).abs().max().item() for a, b in zip(grads[0], grads[8]))

rng = random.Random(0)
times = {"one padded batch": [], "sorted chunks of 8": []}
trl_times = {0: [], 8: []}
for task in g["tasks"]:
    ids = [i for i, it in items.items() if it.task == task]
    real = full = chunked = 0
    for s in range(6):
        ps = rng.sample(ids, 4)
        o = rf([p for p in ps for _ in range(8)], SimpleNamespace(num_generations=8, model=pol, state=SimpleNamespace(global_step=s)))
        P, C = o["prompt_ids"], o["completion_ids"]
        order = sorted(range(len(C)), key=lambda k: len(P[k]) + len(C[k]))
        chunks = [order[j:j + 8] for j in range(0, len(order), 8)]
        real += sum(map(len, P)) + sum(map(len, C))
        full += len(P) * (max(map(len, P)) + max(map(len, C)))
        chunked += sum(len(ch) * (max(len(P[k]) for k in ch) + max(len(C[k]) for k in ch)) for ch in chunks)
        pol.zero_grad()
        t = time.perf_counter()
        forward_backward(P, C)
        times["one padded batch"].append(time.perf_counter() - t)
        g_full = [p.grad.clone() for p in pol.parameters()]
        pol.zero_grad()
        t = time.perf_counter()
        for ch in chunks: forward_backward([P[k] for k in ch], [C[k] for k in ch])
        times["sorted chunks of 8"].append(time.perf_counter() - t)
        diff = max((a - p.grad).abs().max().item() for a, p in zip(g_full, pol.parameters()))
        print(f"{task} batch {s}: one padded batch {times['one padded batch'][-1]:.3f} s, sorted chunks {times['sorted chunks of 8'][-1]:.3f} s, largest gradient difference {diff:.1e}")
        a, b, dl, dg = trl_loss_backward(P, C, o["env_mask"])
        trl_times[0] += a
        trl_times[8] += b
        print(f"{task} batch {s}, TRL compute_loss + backward: grpo_chunk 0 {statistics.median(a):.3f} s, grpo_chunk 8 {statistics.median(b):.3f} s, loss difference {dl:.1e}, largest gradient difference {dg:.1e}")
    print(f"{task}: real tokens {real / full:.2f} of one padded batch, {real / chunked:.2f} of sorted chunks of 8")
a, b = (statistics.median(v) for v in times.values())
print(f"median forward + backward over {len(times['one padded batch'])} batches: one padded batch {a:.3f} s, sorted chunks of 8 {b:.3f} s: {a / b:.2f}x")
a, b = (statistics.median(v) for v in trl_times.values())
print(f"median TRL compute_loss + backward over {len(trl_times[0])} runs: grpo_chunk 0 {a:.3f} s, grpo_chunk 8 {b:.3f} s: {a / b:.2f}x")
