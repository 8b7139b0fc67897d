"""Every trainer of the kit updates float32 master weights, whatever the profile's `dtype`: a tiny model loaded in
bfloat16, one optimizer step at lr 1e-5 of SFT, DPO (full and LoRA), GRPO and DIAL's discriminator (full and LoRA)
changes more than 99 % of the weight elements its gradient reaches (`calirl.training.step_reach`). On bfloat16 weights
themselves about a sixth would move: AdamW's first step is about lr, below half the spacing of most bfloat16 weights.
And the launched trainers that LoRA and the discriminator added take the steps one process takes.

tolerances: trainings compared here take the same batches and the same updates, so their weights differ by rounding
only, far inside lr/100 (an Adam step moves a weight by about lr, so one step taken differently shows as ~lr)."""
import os, tempfile, zlib
import pytest
import torch
from calirl.dial import train_discriminator
from calirl.grpo import grpo_config, train_grpo
from calirl.models import build_tiny_model, load_model, save_model, train_tokenizer
from calirl.runtime import scratch_dir
from calirl.settings import GRPOSettings, load_profile
from calirl.tasks import tiny_items
from calirl.training import dpo_train, sft_train, step_reach
from calirl.users import world_corpus
from conftest import ROOT

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
CHAT = [{"role": "user", "content": "i have 3 apples ."}, {"role": "assistant", "content": "how many more ?"}, {"role": "user", "content": "7 more ."}]
SIM = CHAT[:2] + [{"role": "user", "content": "i want 5 more ."}]
LR = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "A tiny policy and a tiny simulator saved in float32, their tokenizers."
    items = tiny_items("math-chat", "train", 16, 0)
    tok = train_tokenizer(world_corpus(items, 0, turns=2), 400)
    out = {}
    for role in ("policy", "simulator"):
        m, t = build_tiny_model(tok, "qwen2", 32, 1, role=role, seed=0)
        out[role] = (save_model(m, t, tmp_path_factory.mktemp(role)), t)
    return out


def _sft(tiny, reach, **kw):
    path, tok = tiny["policy"]
    model, _ = load_model(path, device="cpu", dtype="bfloat16")
    with tempfile.TemporaryDirectory() as d:
        return sft_train(model, tok, [CHAT, SIM] * 4, d, epochs=1, lr=LR, batch_size=8, max_length=128, callbacks=[reach])[0]

def _dpo(tiny, reach, **kw):
    path, tok = tiny["policy"]
    prompt = tok.apply_chat_template(CHAT[:1], tokenize=False, add_generation_prompt=True)
    pairs = [dict(prompt=prompt, chosen="the answer is 10", rejected="the answer is 3")] * 4
    return dpo_train(path, pairs, lr=LR, beta=0.1, batch_size=4, max_length=128, device="cpu", dtype="bfloat16", callbacks=[reach], **kw)[0]

def _grpo(tiny, reach, **kw):
    path, tok = tiny["policy"]
    model, _ = load_model(path, device="cpu", dtype="bfloat16")
    s = GRPOSettings.of(load_profile("smoke", ROOT / "settings.ini"), device="cpu", dtype="bfloat16", rollout_backend="hf", grpo_lr=LR,
                        G=2, grpo_batch=4, micro_batch=0, max_new_tokens=8)
    varied = lambda prompts, completions, **k: [float(zlib.crc32(str(c).encode()) % 97) for c in completions]   # no tied group
    train_grpo(model, tok, [{"prompt": "the answer is"}] * 4, varied, grpo_config(scratch_dir("calirl-test-grpo-"), 1, s), resume=False, callbacks=[reach])
    return model

def _disc(tiny, reach, **kw):
    path, tok = tiny["simulator"]
    return train_discriminator(path, tok, [CHAT] * 4, [SIM] * 4, 1, LR, batch_size=8, device="cpu", dtype="bfloat16", callbacks=[reach], **kw)

TRAINERS = {"sft": (_sft, {}), "dpo": (_dpo, {}), "dpo_lora": (_dpo, dict(lora=True)), "grpo": (_grpo, {}),
            "disc": (_disc, {}), "disc_lora": (_disc, dict(lora=True))}


@pytest.mark.parametrize("name", TRAINERS)
def test_one_step_from_bfloat16_moves_the_float32_masters(tiny, name):
    "One step at lr 1e-5 from a bfloat16-loaded model changes > 99 % of the float32 weights its gradient reaches."
    run, kw = TRAINERS[name]
    reach = step_reach()
    out = run(tiny, reach, **kw)
    assert reach.share is not None, "no optimizer step was taken"
    assert reach.dtypes == ["float32"], reach.dtypes
    assert reach.share > 0.99, f"{name}: one step moved {reach.share:.1%} of the weights with a gradient"
    if name != "grpo": assert out.dtype == torch.bfloat16, out.dtype   # it comes back in the dtype it runs in


def _gap(a, b) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    return max((sa[k] - sb[k]).abs().max().item() for k in sa)

def test_launched_lora_trainers_take_the_steps_of_one_process(tiny):
    "DIAL's discriminator (LoRA, its head's dropout off: each process draws its own masks) and LoRA DPO over two launched CPU processes end where one process ends."
    sim, stok = tiny["simulator"]
    kw = dict(batch_size=4, seed=0, device="cpu", dropout=0.0, lora=True)
    sims = [CHAT[:1], SIM] * 2                                        # one or two labels per session: the loss's normaliser differs per process
    one = train_discriminator(sim, stok, [CHAT] * 4, sims, 2, 1e-3, threads=1, **kw)
    two = train_discriminator(sim, stok, [CHAT] * 4, sims, 2, 1e-3, processes=2, **kw)
    assert _gap(one, two) < 1e-3 / 100
    pol, ptok = tiny["policy"]
    prompt = ptok.apply_chat_template(CHAT[:1], tokenize=False, add_generation_prompt=True)
    pairs = [dict(prompt=prompt, chosen="the answer is 10", rejected="the answer is 3")] * 4
    kw = dict(lr=1e-3, beta=0.1, batch_size=4, max_length=128, epochs=2, device="cpu", lora=True)
    a, b = dpo_train(pol, pairs, **kw)[0], dpo_train(pol, pairs, processes=2, **kw)[0]
    start, _ = load_model(pol, device="cpu", dtype="float32")
    assert _gap(a, b) < 1e-3 / 100 < _gap(a, start)                   # the same steps, and steps were taken

def test_phase_one_lora_adapter_starts_from_its_seed(tiny):
    "Phase I's LoRA adapter (`sft_lora`) starts from `seed`, whatever drew random numbers before it (DPO's already did)."
    from calirl.sim_sft import simulator_init
    path, tok = tiny["simulator"]
    lora_weights = lambda m: {n: p.detach().clone() for n, p in m.named_parameters() if "lora_" in n}
    a, _ = simulator_init(str(path), tok, "qwen2", 32, 1, lora=True, seed=3)
    torch.rand(1000)                                                    # other work draws between the two starts
    b, _ = simulator_init(str(path), tok, "qwen2", 32, 1, lora=True, seed=3)
    c, _ = simulator_init(str(path), tok, "qwen2", 32, 1, lora=True, seed=4)
    wa, wb, wc = lora_weights(a), lora_weights(b), lora_weights(c)
    assert wa and all(torch.equal(wa[n], wb[n]) for n in wa)
    assert any(not torch.equal(wa[n], wc[n]) for n in wa)              # and the seed matters
