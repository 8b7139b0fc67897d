"""Is the chunked setup's slower decoding in `calirl bench grpo-step` caused by the chunks? The bench's policy and
batches, then 5 lean GRPO steps four times in one process, alternating grpo_chunk 8 and 0, chunks first, on one
thread. Usage, from the project root: python figures/tiny/bench/order.py | grep '^chunk' > figures/tiny/bench/order.txt"""
import tempfile
from dataclasses import replace
from pathlib import Path
from calirl.core import GRPOSettings, PerTask, one_thread, trainer_threads
from calirl.grpo import _grpo_steps
from calirl.models import build_tiny_model, train_tokenizer, save_model
from calirl.dialogue import converse
from calirl.tasks import tiny_items
from calirl.training import sft_train
from calirl.users import ScriptedAssistant, scripted_human, world_corpus
seed, H = 0, 7
items = {it.item_id: it for it in tiny_items("math-chat", "train", 64, seed)}
tok = train_tokenizer(world_corpus(list(items.values())[:32], seed), 1024)
model, ptok = build_tiny_model(tok, "qwen2", 128, 2, "policy", seed)
demos = [d.messages for d in converse(scripted_human(), ScriptedAssistant(0.35, 0.1), tiny_items("math-chat", "eval", 640, seed), H, seed)]
with tempfile.TemporaryDirectory() as d:
    model, _ = sft_train(model, ptok, demos, d, 3, 2e-3, 32, 512, seed, threads=trainer_threads(0, "cpu"))
model_dir = save_model(model, ptok, Path(tempfile.mkdtemp()) / "policy")
settings = GRPOSettings(G=8, grpo_batch=32, grpo_lr=1e-4, adam_beta1=0.9, adam_beta2=0.98, eps_low=0.2, eps_high=0.28,
                        kl_beta=0.0, train_temperature=1.0, max_new_tokens=48, seed=seed, device="cpu", dtype="float32", rollout_backend="hf")
for c in (8, 0, 8, 0):
    with one_thread(): r = _grpo_steps("lean", 5, str(model_dir), items, replace(settings, grpo_chunk=c), H, PerTask("max_len", 512, 512))
    print(f"chunk {c}: step {r['step_s']:.3f} generation {r['generation_s']:.3f} forward {r['forward_s']:.3f} backward {r['backward_s']:.3f} turns {r['turns']:.3f}", flush=True)
