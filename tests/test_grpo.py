"""Multi-turn GRPO (09_grpo): the readable reference equals TRL's computation on the same batch, and a killed
training run resumes from its last checkpoint to the same result as an uninterrupted one."""
# tolerances: trainings that take the same steps are compared on their weights against the size of one Adam step (about
# lr = 1e-3 per weight): lr/100 after a resume from a checkpoint, lr/1000 where only micro-batching or chunking differs;
# a step taken differently moves weights by ~lr and fails. Advantages (float32, groups of ≤ 8 values ≤ 1) at 1e-6.
# vLLM importance ratios: exp of a sum of ≤ 20 float32 log-prob differences, bounded by C_max = 3: 3·20·1.2e-7 ≈ 7e-6 < 1e-5.
# Rows dropped from the loss pass: loss and gradients against the full pass within `order_bound` of the chains of sums
# they come from (the model's forward_reduction, the backward pass through it, the sum over the batch), at the scale of
# the rows' absolute contributions; weights after steps with rows dropped at lr/1000, as for chunking.
import math
import pytest
import torch
torch.set_num_threads(1)   # tiny models: one thread is as fast, and more threads on shared cores thrash
from conftest import ROOT  # noqa: F401  (sets the offline environment)
from calirl.settings import GRPOSettings, PerTask

SETTINGS = GRPOSettings(G=2, grpo_batch=4, grpo_lr=1e-3, adam_beta1=0.9, adam_beta2=0.98, eps_low=0.2, eps_high=0.28, kl_beta=0.0, grpo_updates=1,
                        train_temperature=1.0, max_new_tokens=8, seed=0, device="cpu", dtype="float32", rollout_backend="hf",
                        policy_prompt="plain", micro_batch=0, grpo_chunk=0, vllm_is_mode="sequence_mask")


@pytest.fixture(scope="module")
def tiny():
    "A tiny random policy with a tokenizer trained on the tiny world's text, and training items of both tasks."
    from calirl.models import build_tiny_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    items = tiny_items("math-chat", "train", 8, 0) + tiny_items("docedit-chat", "train", 8, 0)
    tok = train_tokenizer(world_corpus(items[:6], 0, turns=2), 400)
    model, tok = build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=0)
    return model, tok, {it.item_id: it for it in items}


def test_group_advantages_match_trl_formula():
    from trl.trainer.utils import nanstd
    from calirl.grpo import group_advantages
    torch.manual_seed(0)
    R = torch.rand(48).round(decimals=1)
    R[[3, 17, 18]] = math.nan                                 # unscorable
    R[24:32] = 0.5                                            # a zero-variance group
    g = R.view(-1, 8)
    want = torch.nan_to_num((g - torch.nanmean(g, 1, keepdim=True)) / (nanstd(g, 1).unsqueeze(1) + 1e-4), nan=0.0).view(-1)
    assert torch.allclose(group_advantages(R, 8), want, atol=1e-6)
    assert (group_advantages(R, 8)[24:32] == 0).all() and group_advantages(R, 8)[3] == 0


@pytest.mark.parametrize("mask_truncated", [False, True])
def test_reference_equals_trl(tiny, mask_truncated):
    from calirl.grpo import compare_with_trl, edge_case_batch
    model, tok, _ = tiny
    for seed in (0, 1):
        d = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=seed), 4, 0.2, 0.28, 1.0, mask_truncated=mask_truncated, seed=seed)
        assert d["advantages"] < 1e-6 and d["loss"] < 1e-6 and d["grad"] < 1e-6 and d["mask"] == 0, d
        assert d["clip_fraction"] > 0, d                      # the asymmetric clip was exercised


def _train(model, tok, items, out_dir, steps, callbacks=None):
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, train_grpo, transcript_reward
    from calirl.users import artifact_simulator
    cfg = grpo_config(out_dir, steps, SETTINGS, save_steps=1)
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    rf = interactive_rollout_func(artifact_simulator(), items, tok, 2, SETTINGS, PerTask("max_len", 256, 256))
    return train_grpo(model, tok, rows, transcript_reward(items), cfg, rollout_func=rf, callbacks=callbacks)


def test_resume_after_kill(tiny, tmp_path):
    import copy
    from transformers import TrainerCallback
    from calirl.grpo import last_checkpoint, step_log
    model, tok, items = tiny

    class Kill(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            if state.global_step == 2: raise KeyboardInterrupt("killed after step 2")

    full = _train(copy.deepcopy(model), tok, items, tmp_path / "full", 4)
    with pytest.raises(KeyboardInterrupt):
        _train(copy.deepcopy(model), tok, items, tmp_path / "run", 4, callbacks=[Kill()])
    assert last_checkpoint(tmp_path / "run").endswith("checkpoint-2")
    resumed = _train(copy.deepcopy(model), tok, items, tmp_path / "run", 4)        # a fresh process would do the same
    assert resumed.state.global_step == 4
    assert [h["step"] for h in step_log(resumed)] == [1, 2, 3, 4]                    # the log survives the kill
    assert [h["reward"] for h in step_log(resumed)] == pytest.approx([h["reward"] for h in step_log(full)], nan_ok=True)
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.allclose(a, b, atol=1e-5)
    again = _train(copy.deepcopy(model), tok, items, tmp_path / "run", 4)           # finished: nothing is redone
    assert again.state.global_step == 4 and len(step_log(again)) == 4
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(full.model.parameters(), again.model.parameters()))


def test_vllm_colocate_grpo(tmp_path):
    """Paper-profile path: every policy turn of the multi-turn episodes is generated by TRL's colocated vLLM engine
    (weights synced by TRL each step), with and without sleep mode. Needs a CUDA GPU and vLLM; skips loudly otherwise."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip(f"SKIPPED vLLM colocate GRPO: needs vLLM and a CUDA GPU (vllm importable="
                    f"{importlib.util.find_spec('vllm') is not None}, cuda={torch.cuda.is_available()}); `pip install calirl[vllm]` on a GPU machine")
    from calirl.grpo import TrainerVLLM, grpo_config, interactive_rollout_func, interleave, step_log, train_grpo, transcript_reward
    from calirl.models import build_tiny_model, load_model, save_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import artifact_simulator, world_corpus
    items = {it.item_id: it for it in tiny_items("math-chat", "train", 8, 0)}
    tok = train_tokenizer(world_corpus(list(items.values())[:6], 0, turns=2), 400)
    model, tok = build_tiny_model(tok, "qwen2", 64, 2, role="policy", seed=0)
    path = save_model(model, tok, tmp_path / "policy")
    for sleep in (False, True):
        model, tok = load_model(path, device="cuda", dtype="bfloat16")
        gpu = SETTINGS.changed(device="cuda", dtype="bfloat16", rollout_backend="vllm")
        cfg = grpo_config(tmp_path / f"run-{sleep}", 2, gpu, vllm_gpu_memory_utilization=0.15, vllm_enable_sleep_mode=sleep,
                          max_len=PerTask("max_len", 256, 512))
        assert cfg.use_vllm and cfg.vllm_mode == "colocate" and cfg.vllm_max_model_length == 512
        assert (cfg.vllm_importance_sampling_correction, cfg.vllm_importance_sampling_mode) == (True, gpu.vllm_is_mode)
        rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
        calls = []
        inner = interactive_rollout_func(artifact_simulator(), items, tok, 2, gpu, PerTask("max_len", 256, 256))
        def spy(prompts, trainer):
            eng = trainer.vllm_generation.llm
            real = eng.generate
            eng.generate = lambda *a, **k: (calls.append(len(a[0])), real(*a, **k))[1]     # count the engine's calls
            try: return inner(prompts, trainer)
            finally: eng.generate = real
        tr = train_grpo(model, tok, rows, transcript_reward(items), cfg, rollout_func=spy)
        assert TrainerVLLM(tr, tok).llm is tr.vllm_generation.llm   # the rollout engine is the trainer's own, weights synced by TRL
        assert tr.state.global_step == 2 and len(step_log(tr)) == 2
        assert len(calls) >= 2 and sum(calls) >= 8, calls           # every policy turn went through the trainer's engine
        assert all(0 <= h["sampling/is_out_of_bounds"] <= 1 for h in step_log(tr)), step_log(tr)   # logged every step
        print(f"sleep={sleep}: {len(calls)} engine calls, rewards {[h['reward'] for h in step_log(tr)]}")
        del tr; torch.cuda.empty_cache()


def varied(prompts, completions, completion_ids, **kw):
    "A reward that differs within a group, so that every group has an advantage."
    return [float(sum(c) % 7) for c in completion_ids]


def test_micro_batches_give_the_same_update(tiny, tmp_path):
    """`micro_batch`: the step's rollouts go through forward/backward in passes of `micro_batch` with gradient
    accumulation, generated once and applied once — the same update as one pass over the whole batch."""
    import copy
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, step_log, train_grpo
    from calirl.users import artifact_simulator
    model, tok, items = tiny
    out = {}
    for micro in (0, 2):
        s = SETTINGS.changed(micro_batch=micro)
        cfg = grpo_config(tmp_path / f"m{micro}", 1, s, save_steps=1)
        assert cfg.gradient_accumulation_steps == (1 if micro == 0 else 2)
        rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
        calls = []
        inner = interactive_rollout_func(artifact_simulator(), items, tok, 2, s, PerTask("max_len", 256, 256))
        rf = lambda prompts, trainer: (calls.append(len(prompts)), inner(prompts, trainer))[1]
        tr = train_grpo(copy.deepcopy(model), tok, rows, varied, cfg, rollout_func=rf)
        assert calls == [SETTINGS.grpo_batch] and len(step_log(tr)) == 1, calls     # generated once, for the whole batch
        assert step_log(tr)[0]["clip_ratio/region_mean"] == 0.0                    # one update per batch: every ratio is 1, nothing clipped
        out[micro] = tr.model
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), out[0].parameters()))   # the step did move the policy
    for a, b in zip(out[0].parameters(), out[2].parameters()):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()


def test_several_updates_per_rollout_batch_make_the_clip_act(tiny, tmp_path):
    """`grpo_updates = 2`: each rollout batch is generated once and split into two mini-batches, one optimizer step
    each; the second step's probability ratios have left 1, so the clip can act, and the log keeps one entry per batch."""
    import copy
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, step_log, train_grpo
    from calirl.users import artifact_simulator
    model, tok, items = tiny
    s = SETTINGS.changed(grpo_updates=2, grpo_lr=3e-2)                  # a large step, so that the second update sees it
    cfg = grpo_config(tmp_path / "u2", 2, s, save_steps=1)
    assert (cfg.max_steps, cfg.steps_per_generation, cfg.gradient_accumulation_steps, cfg.per_device_train_batch_size) == (4, 2, 1, 2)
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    calls = []
    inner = interactive_rollout_func(artifact_simulator(), items, tok, 2, s, PerTask("max_len", 256, 256))
    rf = lambda prompts, trainer: (calls.append(len(prompts)), inner(prompts, trainer))[1]
    tr = train_grpo(copy.deepcopy(model), tok, rows, varied, cfg, rollout_func=rf)
    assert calls == [SETTINGS.grpo_batch] * 2 and tr.state.global_step == 4   # two batches, two updates each
    log = step_log(tr)
    assert len(log) == 2 and all("clip_ratio/region_mean" in h for h in log)
    assert any(h["clip_ratio/region_mean"] > 0 for h in log), log           # the second update's ratios left 1 and were clipped
    with pytest.raises(ValueError, match="does not split into grpo_updates = 3"): grpo_config(tmp_path / "u3", 1, SETTINGS.changed(grpo_updates=3))

def test_variant_trains_over_two_launched_processes(tiny, tmp_path):
    """`processes` > 1: a GRPO variant is trained by `accelerate launch` in two processes (two CPU processes over gloo
    here; one per GPU at paper scale), each generating its half of the step's global batch, and the main process saves
    the policy once."""
    from calirl.grpo import Variant, interleave, train_variant
    from calirl.models import load_model, save_model
    from calirl.training import launched
    model, tok, items = tiny
    save_model(model, tok, tmp_path / "base")
    s = SETTINGS.changed(micro_batch=2)                       # global batch 4 = 2 per process × 2 processes × 1 pass
    v = Variant("naive", base_path=str(tmp_path / "base"), rows=interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0),
                items=items, user=dict(kind="artifact-simulator"), judge=dict(kind="verifier"), settings=s, max_len=PerTask("max_len", 256, 256),
                H=2, steps=2, ckpt_root=str(tmp_path / "ckpt"), out_path=str(tmp_path / "policy_naive"), report_to=("none",))
    def job(v):                                               # defined here, so it travels by value to the launched processes
        import os
        from calirl.grpo import grpo_config
        cfg = grpo_config(tmp_path / "probe", v.steps, v.settings)
        return train_variant(v), int(os.environ["WORLD_SIZE"]), cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps
    (log, secs), world, per_device, accumulation = launched(job, v, 2, log=tmp_path / "launch.log")
    assert (world, per_device, accumulation) == (2, 2, 1)
    assert len(log) == 2 and all(math.isfinite(h["entropy"]) and h["completions/mean_length"] > 0 for h in log), log
    trained, _ = load_model(tmp_path / "policy_naive", device="cpu", dtype="float32")
    assert trained.state_dict().keys() == model.state_dict().keys()


@pytest.mark.parametrize("chunk,arch", [(1, "qwen2"), (3, "qwen2"), (3, "gemma3")])
def test_length_chunks_equal_trl_and_the_reference(tiny, chunk, arch):
    """`grpo_chunk`: rows in length-sorted chunks, each cut to its own columns, give TRL's advantages, loss and
    gradients on the edge-case batch, equal to the independent reference to float rounding (both tiny architectures)."""
    from calirl.grpo import compare_with_trl, edge_case_batch
    from calirl.models import build_tiny_model
    model, tok, _ = tiny
    if arch != "qwen2": model, tok = build_tiny_model(tok, arch, 32, 1, role="policy", seed=0)
    for mt in (False, True):
        d = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=1), 4, 0.2, 0.28, 1.0, mask_truncated=mt, seed=1, chunk=chunk)
        assert d["advantages"] < 1e-6 and d["loss"] < 1e-6 and d["grad"] < 1e-6 and d["mask"] == 0, d


def test_length_chunks_give_the_same_update(tiny, tmp_path):
    """A GRPO step with `grpo_chunk` = 1 (every rollout cut to its own length) moves the policy as the padded pass does;
    the trainer's log-prob pass really is the chunked one."""
    import copy
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, step_log, train_grpo
    from calirl.users import artifact_simulator
    model, tok, items = tiny
    out, widths = {}, []
    for chunk in (0, 1):
        s = SETTINGS.changed(grpo_chunk=chunk)
        cfg = grpo_config(tmp_path / f"c{chunk}", 1, s, save_steps=1)
        rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
        rf = interactive_rollout_func(artifact_simulator(), items, tok, 2, s, PerTask("max_len", 256, 256))
        spy = copy.deepcopy(model)
        spy.register_forward_pre_hook(lambda m, a, k, c=chunk: widths.append((c, tuple(k["input_ids"].shape))) if "labels" in k else None, with_kwargs=True)
        tr = train_grpo(spy, tok, rows, varied, cfg, rollout_func=rf, chunk=chunk)
        assert len(step_log(tr)) == 1
        if chunk:                                              # rows cut to their own span hold only real tokens
            assert tr.chunk_tokens["chunked"] == tr.chunk_tokens["real"] < tr.chunk_tokens["padded"], tr.chunk_tokens
        out[chunk] = tr.model
    full = {shape for c, shape in widths if c == 0}
    cut = [shape for c, shape in widths if c == 1]
    assert all(s[0] == SETTINGS.grpo_batch for s in full) and cut and all(s[0] == 1 for s in cut), widths
    assert max(s[1] for s in cut) <= max(s[1] for s in full) and min(s[1] for s in cut) < min(s[1] for s in full), widths
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), out[0].parameters()))
    for a, b in zip(out[0].parameters(), out[1].parameters()):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()


@pytest.mark.parametrize("mode", ["sequence_mask", "sequence_truncate", "token_mask", "token_truncate"])
def test_reference_equals_trl_with_vllm_importance_sampling(tiny, mode):
    """TRL's vLLM path (`vllm_is_mode`), fed sampling log-probs that differ from the trainer's: its importance ratios,
    loss and gradients equal the reference's, and the share of episodes out of bounds that `log_vllm_is` logs is the
    reference's. Sampled on the CPU: the log-probs stand in for vLLM's."""
    from calirl.grpo import IS_MODES, compare_with_trl, edge_case_batch
    assert mode in IS_MODES
    model, tok, _ = tiny
    for seed in (0, 1):
        d = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=seed), 4, 0.2, 0.28, 1.0, seed=seed, is_mode=mode)
        assert d["advantages"] < 1e-6 and d["loss"] < 1e-6 and d["grad"] < 1e-6 and d["mask"] == 0 and d["is_ratio"] < 1e-5, d
        assert d["is_logged"] == pytest.approx(d["is_out"], abs=1e-9) and d["is_moved"] > 0.1, d
        if mode.startswith("sequence"): assert 0 < d["is_out"] < 1, d
        without = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=seed), 4, 0.2, 0.28, 1.0, seed=seed)
        assert abs(without["loss_value"] - d["loss_value"]) > 1e-4, (without, d)   # the correction is in the objective checked


def test_vllm_settings_reach_trl():
    "`vllm_is_mode` and the vLLM context length reach TRL's GRPOConfig; on the CPU a vLLM configuration is refused."
    from trl import GRPOConfig
    from calirl.grpo import grpo_config, vllm_context, vllm_kwargs
    ml = PerTask("max_len", 300, 700)
    assert vllm_context(ml) == 700
    for mode in ("sequence_mask", "sequence_truncate", "token_mask", "token_truncate", "off"):
        cfg = GRPOConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **vllm_kwargs(SETTINGS.changed(vllm_is_mode=mode), ml, 0.2, True))
        assert (cfg.use_vllm, cfg.vllm_mode, cfg.vllm_max_model_length, cfg.vllm_gpu_memory_utilization, cfg.vllm_enable_sleep_mode) == (True, "colocate", 700, 0.2, True)
        assert cfg.vllm_importance_sampling_correction == (mode != "off")
        if mode != "off": assert cfg.vllm_importance_sampling_mode == mode
    with pytest.raises(Exception, match="not allowed"): SETTINGS.changed(vllm_is_mode="tis")
    with pytest.raises(ValueError, match="needs a CUDA device"): grpo_config("unused", 1, SETTINGS.changed(rollout_backend="vllm"), max_len=ml)


def test_rollouts_fit_the_vllm_context(tiny):
    """Every multi-turn episode, and so every request the rollout sends with its reply, fits in `vllm_context`, also
    when the context limits bind (episodes end at them)."""
    from types import SimpleNamespace
    from calirl.grpo import interactive_rollout_func, vllm_context
    from calirl.users import artifact_simulator
    import copy
    from calirl.models import turn_end_ids
    model, tok, items = tiny
    model, end = copy.deepcopy(model), turn_end_ids(tok)[0]
    bias = torch.zeros(model.lm_head.out_features)
    bias[end] = 4.0                                             # the random policy, made to end its turns often: episodes run rounds
    model.lm_head.bias = torch.nn.Parameter(bias)
    ids = list(items)[:2] + list(items)[-2:]                   # both tasks
    fake = SimpleNamespace(num_generations=2, model=model, state=SimpleNamespace(global_step=0))
    s = SETTINGS.changed(max_new_tokens=16)
    free = interactive_rollout_func(artifact_simulator(), items, tok, 4, s, PerTask("max_len", 1024, 1024))([i for i in ids for _ in range(2)], fake)
    P = max(len(p) for p in free["prompt_ids"])
    longest = max(len(p) + len(c) for p, c in zip(free["prompt_ids"], free["completion_ids"]))
    assert longest > P + s.max_new_tokens + 2, longest         # unbounded, some episodes grow past one round
    ml = PerTask("max_len", P + s.max_new_tokens + 1, P + s.max_new_tokens + 2)
    out = interactive_rollout_func(artifact_simulator(), items, tok, 4, s, ml)([i for i in ids for _ in range(2)], fake)
    n = [len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"])]
    assert all(k <= ml[items[i].task] <= vllm_context(ml) for k, i in zip(n, out["item_id"])), n
    assert "context_overflow" in out["termination"], out["termination"]


def test_the_trainer_hands_vllm_the_folder_it_trains(tiny, tmp_path):
    """The paper's policy is a multimodal Gemma-3: trained from the hub's layout, TRL would build vLLM's engine from a
    checkpoint whose tensor names are not the trainer's, and `check_vllm_source` refuses it; from the text-only folder
    `04c` saves, 09's trainer hands vLLM that folder, holding the trained model under the names TRL pushes."""
    from calirl.base_policy import save_text_model
    from calirl.grpo import check_vllm_source, grpo_config, grpo_trainer
    from calirl.models import load_model, tiny_multimodal, with_hub_template
    _, tok, _ = tiny
    gtok = with_hub_template(tok, "gemma3")
    tiny_multimodal(gtok, 32, 1, 0).save_pretrained(tmp_path / "multimodal")
    gtok.save_pretrained(tmp_path / "multimodal")
    hub_layout, _ = load_model(tmp_path / "multimodal", device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="Gemma3ForConditionalGeneration"): check_vllm_source(hub_layout)
    save_text_model(tmp_path / "multimodal", tmp_path / "text")
    model, _ = load_model(tmp_path / "text", device="cpu", dtype="float32")
    tr = grpo_trainer(model, gtok, [{"prompt": "p"}] * 2, varied, grpo_config(tmp_path / "run", 1, SETTINGS))
    assert tr.model.name_or_path == str(tmp_path / "text") and check_vllm_source(tr.model) == str(tmp_path / "text")
    model.name_or_path = "google/gemma-3-4b-it"
    with pytest.raises(ValueError, match="not a local model folder"): check_vllm_source(model)


def test_vllm_colocate_grpo_on_the_text_folder_of_a_multimodal_checkpoint(tmp_path):
    """The paper's policy path on a GPU: a tiny `Gemma3ForConditionalGeneration` saved as the hub has it, written as the
    text-only folder 04c writes (`save_text_model`), trained for two GRPO steps whose rollouts go through TRL's colocated
    vLLM engine, built from that folder and updated from the trainer's weights each step. Needs a CUDA GPU and vLLM."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip(f"SKIPPED vLLM GRPO on a multimodal checkpoint's text folder: needs vLLM and a CUDA GPU (vllm importable="
                    f"{importlib.util.find_spec('vllm') is not None}, cuda={torch.cuda.is_available()})")
    from calirl.base_policy import save_text_model
    from calirl.grpo import check_vllm_source, grpo_config, interactive_rollout_func, interleave, step_log, train_grpo, transcript_reward
    from calirl.models import load_model, tiny_multimodal, train_tokenizer, with_hub_template
    from calirl.tasks import tiny_items
    from calirl.users import artifact_simulator, world_corpus
    items = {it.item_id: it for it in tiny_items("math-chat", "train", 8, 0)}
    gtok = with_hub_template(train_tokenizer(world_corpus(list(items.values())[:6], 0, turns=2), 400), "gemma3")
    tiny_multimodal(gtok, 64, 2, 0).save_pretrained(tmp_path / "multimodal")
    gtok.save_pretrained(tmp_path / "multimodal")
    save_text_model(tmp_path / "multimodal", tmp_path / "text")
    model, tok = load_model(tmp_path / "text", device="cuda", dtype="bfloat16")
    assert check_vllm_source(model) == str(tmp_path / "text")
    gpu = SETTINGS.changed(device="cuda", dtype="bfloat16", rollout_backend="vllm")
    cfg = grpo_config(tmp_path / "run", 2, gpu, vllm_gpu_memory_utilization=0.15, max_len=PerTask("max_len", 256, 512))
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    tr = train_grpo(model, tok, rows, transcript_reward(items), cfg,
                    rollout_func=interactive_rollout_func(artifact_simulator(), items, tok, 2, gpu, PerTask("max_len", 256, 256)))
    assert tr.state.global_step == 2 and len(step_log(tr)) == 2
    print(f"multimodal checkpoint's text folder on vLLM: rewards {[h['reward'] for h in step_log(tr)]}")


@pytest.mark.parametrize("chunk", [0, 3])
def test_dropping_zero_rows_equals_the_full_pass(tiny, chunk):
    """With kl_beta = 0 and DAPO, the rows with Â = 0 (groups whose rewards do not vary) are left out of the loss pass:
    loss and gradients equal the full pass's within the rounding of the sums they come from (`order_bound`), while
    leaving out one row that has a gradient too is caught by the same bound; the dropped rows' columns are cut."""
    from calirl.grpo import dropped_vs_full, zero_groups_batch
    from calirl.runtime import assert_order_close
    model, tok, _ = tiny
    for seed, zero in [(0, [1]), (1, [0, 2]), (2, [2])]:
        d = dropped_vs_full(model, tok, zero_groups_batch(tok, 4, 3, zero, seed), 4, 0.2, 0.28, seed=seed, chunk=chunk)
        assert (d["rows"], d["run"]) == (12, 4 * (3 - len(zero))) and d["width_dropped"] < d["width"], d
        assert_order_close(d["loss_dropped"], d["loss"], *d["loss_reduction"], scale=d["loss_scale"])
        with pytest.raises(AssertionError, match="exceeds"):
            assert_order_close(d["loss_missing_row"], d["loss"], *d["loss_reduction"], scale=d["loss_scale"])
        for g, h, s in zip(d["grads_dropped"], d["grads"], d["grad_scales"]):
            assert_order_close(g, h, *d["grad_reduction"], scale=s.max())


def test_a_pass_with_every_row_dropped_writes_zero_gradients(tiny):
    """No row of the pass has a gradient: its shortest row alone runs, and every parameter gets a gradient of exactly 0
    (not None, which AdamW would skip), as in TRL's full pass."""
    from calirl.grpo import dropped_vs_full, zero_groups_batch
    model, tok, _ = tiny
    d = dropped_vs_full(model, tok, zero_groups_batch(tok, 4, 2, [0, 1], 0), 4, 0.2, 0.28)
    assert d["run"] == 1 and d["loss"] == d["loss_dropped"] == 0.0, d
    assert all(g is not None and not g.any() for g in d["grads_dropped"])
    assert all(g is not None and not g.any() for g in d["grads"])


@pytest.mark.parametrize("mask_truncated", [False, True])
def test_reference_equals_trl_with_rows_dropped(tiny, mask_truncated):
    """The check against TRL's computation holds with the rows that carry no gradient dropped (the edge-case batch's
    zero-variance group, unscorable row and fully masked row), and through TRL's vLLM importance-sampling path."""
    from calirl.grpo import compare_with_trl, edge_case_batch
    model, tok, _ = tiny
    for seed in (0, 1):
        d = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=seed), 4, 0.2, 0.28, 1.0, mask_truncated=mask_truncated, seed=seed, drop=True)
        assert d["advantages"] < 1e-6 and d["loss"] < 1e-6 and d["grad"] < 1e-6 and d["mask"] == 0 and d["clip_fraction"] > 0, d
    d = compare_with_trl(model, tok, edge_case_batch(tok, G=4, seed=0), 4, 0.2, 0.28, 1.0, mask_truncated=mask_truncated, is_mode="sequence_mask", drop=True)
    assert d["loss"] < 1e-6 and d["grad"] < 1e-6 and d["is_ratio"] < 1e-5, d


def half_flat(prompts, completions, completion_ids, item_id, **kw):
    "A reward that varies within math-chat groups and is 0 for every docedit-chat episode: their groups have Â = 0."
    return [0.0 if i.startswith("doce") else float(sum(c) % 7) for c, i in zip(completion_ids, item_id)]


def flat(prompts, completions, **kw):
    "The same reward for every episode: no group has a learning signal."
    return [1.0] * len(completions)


def test_dropping_gives_the_same_update(tiny, tmp_path):
    """Training steps with rows dropped (the default where exact) move the policy as steps over every row do; a step in
    which no row has a gradient gives AdamW a zero gradient for every parameter, so its state is the full pass's."""
    import copy
    from calirl.grpo import grpo_config, interactive_rollout_func, interleave, train_grpo
    from calirl.users import artifact_simulator
    model, tok, items = tiny
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    rf = interactive_rollout_func(artifact_simulator(), items, tok, 2, SETTINGS, PerTask("max_len", 256, 256))
    out = {}
    for reward, steps in ((half_flat, 2), (flat, 1)):
        for drop in (False, True):
            tr = train_grpo(copy.deepcopy(model), tok, rows, reward, grpo_config(tmp_path / f"{reward.__name__}-{drop}", steps, SETTINGS, save_steps=10),
                            rollout_func=rf, drop_zero=drop)
            assert hasattr(tr, "zero_rows") == drop
            out[reward.__name__, drop] = tr
        dropped = out[reward.__name__, True]
        want = dict(run=1, dropped=SETTINGS.grpo_batch - 1) if reward is flat else None        # flat: the shortest row alone runs
        assert dropped.zero_rows == want if want else dropped.zero_rows["dropped"] >= 2 * steps, dropped.zero_rows   # docedit's group, each step
        for a, b in zip(out[reward.__name__, False].model.parameters(), dropped.model.parameters()):
            assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), out["half_flat", True].model.parameters()))   # it did learn
    full, dropped = out["flat", False], out["flat", True]
    for a, b in zip(full.model.parameters(), dropped.model.parameters()):
        sa, sb = full.optimizer.state[a], dropped.optimizer.state[b]
        assert sb and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), (sa, sb)   # a zero gradient, not None


def test_rows_are_dropped_only_where_the_update_stays_trls(tiny, tmp_path):
    """`grpo_trainer` drops rows with kl_beta = 0 and DAPO; with a KL term every row has a gradient and all are kept,
    and `drop_zero_rows` refuses a trainer whose loss would change (another normaliser, a KL term)."""
    from calirl.grpo import drop_zero_rows, grpo_config, grpo_trainer
    from calirl.models import load_model, save_model
    model, tok, _ = tiny
    model, tok = load_model(save_model(model, tok, tmp_path / "base"), device="cpu", dtype="float32")   # TRL builds its KL reference from the folder
    make = lambda beta, **kw: grpo_trainer(model, tok, [{"prompt": "p"}] * 2, flat, grpo_config(tmp_path / f"b{beta}", 1, SETTINGS.changed(kl_beta=beta)), **kw)
    assert make(0.0).drop_zero is True and not hasattr(make(0.0, drop_zero=False), "drop_zero")
    kl = make(0.04)
    assert not hasattr(kl, "drop_zero")
    with pytest.raises(ValueError, match="kl_beta = 0"): drop_zero_rows(kl)
    bnpo = make(0.0, drop_zero=False)
    bnpo.loss_type = "bnpo"
    with pytest.raises(ValueError, match="loss_type = dapo"): drop_zero_rows(bnpo)
