"""Multi-turn GRPO (09_grpo): the readable reference equals TRL's computation on the same batch, and a killed
training run resumes from its last checkpoint to the same result as an uninterrupted one."""
import math
import pytest
import torch
torch.set_num_threads(1)   # tiny models: one thread is as fast, and more threads on shared cores thrash
from conftest import ROOT  # noqa: F401  (sets the offline environment)


@pytest.fixture(scope="module")
def tiny():
    "A tiny random policy with a tokenizer trained on the tiny world's text, and training items of both tasks."
    from calirl.models import build_tiny_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    items = tiny_items("math-chat", "train", 8, 0) + tiny_items("docedit-chat", "train", 8, 0)
    tok = train_tokenizer(world_corpus(items[:6], 0, H=2), 400)
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
    cfg = grpo_config(out_dir, steps=steps, G=2, grpo_batch=4, grpo_lr=1e-3, adam_beta1=0.9, adam_beta2=0.98, eps_low=0.2,
                      eps_high=0.28, kl_beta=0.0, train_temperature=1.0, max_new_tokens=8, seed=0, save_steps=1)
    rows = interleave([{"prompt": i, "task": it.task} for i, it in items.items()], seed=0)
    rf = interactive_rollout_func(artifact_simulator(), items, tok, 2, 8, 1.0, {"math-chat": 256, "docedit-chat": 256}, seed=0)
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
