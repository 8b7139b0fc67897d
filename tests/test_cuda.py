"""The GPU paths that need no vLLM: GRPO with rollouts on Hugging Face `generate` in bf16, SFT and DPO with bf16
autocast and gradient checkpointing, DIAL's discriminator, each on the device the caller names. Each test runs twice:
on the CPU everywhere (which checks the test itself) and on CUDA where torch sees a GPU, skipping loudly otherwise.
These are the faults the first GPU run found (a discriminator on the GPU fed CPU tensors; a model that went to the GPU
although its caller said CPU), kept from coming back."""
import pytest
import torch
torch.set_num_threads(1)
from conftest import ROOT  # noqa: F401  (sets the offline environment)
from calirl.settings import GRPOSettings, PerTask

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                  reason="SKIPPED the CUDA twin: torch sees no CUDA GPU here"))]
CHAT = [{"role": "user", "content": "i have 12 apples ."}, {"role": "assistant", "content": "how many more ?"},
        {"role": "user", "content": "5 more ."}, {"role": "assistant", "content": "12 + 5 = 17 ."}]


def _dtype(device:str) -> str: return "bfloat16" if device == "cuda" else "float32"


def varied(prompts, completions, completion_ids, **kw):
    "A reward that differs within a group (a random policy against the artifact user rarely earns any), so every step has a gradient."
    return [float(sum(c) % 7) for c in completion_ids]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    "A tiny policy and a tiny simulator saved to folders, and training items of both tasks."
    from calirl.models import build_tiny_model, save_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    items = tiny_items("math-chat", "train", 8, 0) + tiny_items("docedit-chat", "train", 8, 0)
    tok = train_tokenizer(world_corpus(items[:6], 0, turns=2), 400)
    d = tmp_path_factory.mktemp("models")
    policy = save_model(*build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=0), d / "policy")
    sim = save_model(*build_tiny_model(tok, "qwen2", 32, 1, role="simulator", seed=0), d / "simulator")
    return policy, sim, {it.item_id: it for it in items}


@pytest.mark.parametrize("device", DEVICES)
def test_grpo_steps_with_rollouts_on_the_device(saved, device, tmp_path):
    "Two multi-turn GRPO steps (rollouts on the HF backend) move the weights and keep the model where the settings say."
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, step_log, train_grpo
    from calirl.models import load_model
    from calirl.users import artifact_simulator
    policy, _, items = saved
    s = GRPOSettings(G=2, grpo_batch=4, grpo_lr=1e-3, adam_beta1=0.9, adam_beta2=0.98, eps_low=0.2, eps_high=0.28, kl_beta=0.0, grpo_updates=1,
                     train_temperature=1.0, max_new_tokens=8, seed=0, device=device, dtype=_dtype(device), rollout_backend="hf",
                     policy_prompt="plain", micro_batch=0, grpo_chunk=0, vllm_is_mode="sequence_mask")
    model, tok = load_model(policy, device=device, dtype=s.dtype)
    before = [p.detach().float().cpu().clone() for p in model.parameters()]
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    rf = interactive_rollout_func(artifact_simulator(), items, tok, 2, s, PerTask("max_len", 256, 256))
    tr = train_grpo(model, tok, rows, varied, grpo_config(tmp_path, 2, s, save_steps=10**6), rollout_func=rf)
    assert tr.state.global_step == 2 and len(step_log(tr)) == 2
    assert {p.device.type for p in tr.model.parameters()} == {device}
    moved = max((p.detach().float().cpu() - b).abs().max().item() for p, b in zip(tr.model.parameters(), before))
    assert moved > 0, "the weights did not move"
    print(f"{device}: rewards {[h['reward'] for h in step_log(tr)]}, largest weight change {moved:.2e}")


@pytest.mark.parametrize("device", DEVICES)
def test_sft_and_dpo_on_the_device(saved, device, tmp_path):
    "SFT (bf16 autocast and gradient checkpointing on CUDA) and DPO train where asked; held-out loss leaves the model where it was."
    from calirl.models import load_model, save_model
    from calirl.training import dpo_train, preference_pair, sft_heldout_loss, sft_train
    policy, _, _ = saved
    model, tok = load_model(policy, device=device, dtype=_dtype(device))
    model, log = sft_train(model, tok, [CHAT] * 8, tmp_path / "sft", epochs=1, lr=1e-3, batch_size=4, max_length=128, seed=0, threads=1)
    assert log and all(h["loss"] == h["loss"] for h in log), log                     # losses logged and not NaN
    assert model.device.type == device
    cpu_model, _ = load_model(policy, device="cpu", dtype="float32")
    loss = sft_heldout_loss(cpu_model, tok, [CHAT] * 2, max_length=128)
    assert loss > 0 and cpu_model.device.type == "cpu"                               # evaluated where it is, on any machine
    path = save_model(model, tok, tmp_path / "sft_model")
    pairs = [preference_pair(tok, CHAT[:1], "how many more ?", "ok .")] * 4
    m2, _, dlog = dpo_train(path, pairs, lr=1e-3, beta=0.1, batch_size=2, max_length=128, epochs=1, seed=0,
                            device=device, dtype=_dtype(device), threads=1)
    assert dlog and m2.device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_discriminator_on_the_device(saved, device):
    "DIAL's discriminator trains on `device` and scores sessions there, whatever else the machine has."
    from calirl.dial import p_real, train_discriminator
    from calirl.models import load_tokenizer
    _, sim, _ = saved
    tok = load_tokenizer(sim)
    real = [CHAT[:3]] * 4
    fake = [CHAT[:2] + [{"role": "user", "content": "i want 5 more ."}]] * 4
    disc = train_discriminator(sim, tok, real, fake, 1, 1e-3, batch_size=4, seed=0, threads=1, device=device)
    assert disc.device.type == device
    ps = p_real(disc, tok, real[:1] + fake[:1])
    assert [len(p) for p in ps] == [2, 2] and all(((p >= 0) & (p <= 1)).all() for p in ps), ps
