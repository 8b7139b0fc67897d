"""Independent runs in a worker pool (`calirl.runtime.pmap`): on the smoke run's own models, GRPO variants and evaluations
give bit-identical results in two worker processes and one by one in this process.

At smoke scale every reward is 0, so GRPO's gradients are 0 and the saved weights equal the base policy's; what would
differ between processes are the sampled rollouts and the forward passes, which the step logs record (completion
lengths, the policy's entropy to full float precision, rewards), and the evaluation transcripts."""
import math
from pathlib import Path
import pandas as pd
import torch
from conftest import ROOT  # noqa: F401  (sets the offline environment)
from calirl.settings import GRPOSettings, PerTask, load_profile


from calirl.runtime import pmap
from calirl.artifacts import model_source, require_artifact
def _weights(path) -> dict:
    from safetensors.torch import load_file
    return {k: v for f in sorted(Path(path).glob("*.safetensors")) for k, v in load_file(f).items()}

def _same_log(a:list[dict], b:list[dict]) -> bool:
    "Step logs equal in every logged quantity but wall-clock ones."
    drop = lambda h: {k: v for k, v in h.items() if "time" not in k and "per_second" not in k}
    return [drop(h) for h in a] == [drop(h) for h in b]


def test_variants_and_evaluations_do_not_depend_on_workers(smoke_reproduction, tmp_path):
    from calirl.components import judge_spec, user_spec
    from calirl.dialogue import load_conversations
    from calirl.evaluate import EvalJob, evaluate_job
    from calirl.grpo import Variant, interleave, static_prompts, train_variant
    from calirl.tasks import load_items
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    prof = load_profile("smoke", project / "settings.ini")
    run_dir = project / "runs" / "smoke"
    items = {it.item_id: it for t in prof.tasks for it in load_items(prof.world, t, prof.n_train_items, prof.n_eval_items, prof.seed)[0]}
    traces = load_conversations(require_artifact(run_dir, "oracle_traces"))
    all_items = {it.item_id: it for t in prof.tasks for it in load_items(prof.world, t, 10_000, prof.n_eval_items, prof.seed)[0]}
    common = dict(report_to=("none",), base_path=model_source(run_dir, "policy_base"), judge=judge_spec(prof), settings=GRPOSettings.of(prof),
                  max_len=PerTask.of(prof, "max_len"), H=prof.H, steps=2)
    def variants(where:str) -> list:
        out = lambda n: str(tmp_path / where / f"policy_{n}")
        ck = str(tmp_path / where / "ckpt")
        return [Variant("calibrated", rows=interleave([{"prompt": i, "task": it.task} for i, it in items.items()]), items=items,
                        user=user_spec("calibrated", prof, run_dir), out_path=out("calibrated"), ckpt_root=ck, **common),
                Variant("static", rows=interleave(static_prompts(traces, all_items)), items=all_items, user=None,
                        out_path=out("static"), ckpt_root=ck, **common)]
    one, two = variants("one"), variants("two")
    logs_one, logs_two = pmap(train_variant, one, 1), pmap(train_variant, two, 2)
    for a, b, va, vb in zip(logs_one, logs_two, one, two):
        assert len(a[0]) == 2 and _same_log(a[0], b[0]), (va.name, a[0], b[0])
        assert all(math.isfinite(h["entropy"]) and h["completions/mean_length"] > 0 for h in a[0]), a[0]   # forward passes and samples
        wa, wb = _weights(va.out_path), _weights(vb.out_path)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), va.name
    held = {t: load_items(prof.world, t, 1, prof.n_eval_items, prof.seed)[1] for t in prof.tasks}
    jobs = [EvalJob(m, model_source(run_dir, a), s, held, user_spec("evaluation", prof), judge_spec(prof), prof.H, prof.max_new_tokens,
                    prof.eval_temperature, prof.device, prof.dtype, prof.policy_prompt) for m, a in (("Base", "policy_base"), ("Oracle", "policy_oracle")) for s in prof.eval_seeds]
    ev_one, ev_two = pmap(evaluate_job, jobs, 1), pmap(evaluate_job, jobs, 2)
    pd.testing.assert_frame_equal(pd.concat([d for d, _ in ev_one]), pd.concat([d for d, _ in ev_two]))
    assert [t.messages for _, T in ev_one for *_, t in T] == [t.messages for _, T in ev_two for *_, t in T]


def test_on_policy_calibration_does_not_depend_on_workers(smoke_reproduction):
    "10a's jobs (`policy_calibration`: one policy against every user model, built in its worker) on 1 and 2 workers."
    from functools import partial
    from calirl.artifacts import phase2_simulator_path
    from calirl.calibration import OnPolicySettings, policy_calibration
    from calirl.tasks import validation_items
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    prof = load_profile("smoke", project / "settings.ini")
    run_dir = project / "runs" / "smoke"
    dial = phase2_simulator_path(run_dir, "dial")
    sources = {"sft-simulator": model_source(run_dir, "simulator_sft"), f"dial-{Path(dial).name}": dial}
    items = {t: validation_items(prof.world, t, 4, prof.n_train_items, prof.n_eval_items, prof.seed) for t in prof.tasks}
    policies = [("base", prof.seed, model_source(run_dir, "policy_base")), ("Oracle", prof.seed, model_source(run_dir, "policy_oracle"))]
    job = partial(policy_calibration, s=OnPolicySettings.of(prof), sim_sources=sources, items=items, n_samples=4, n_hist=4)
    one, two = pmap(job, policies, 1), pmap(job, policies, 2)
    for (a, _), (b, _) in zip(one, two): pd.testing.assert_frame_equal(a, b)
    assert set(one[0][0].user) >= set(sources) and one[0][0].user.nunique() == 4 and len(one[0][0]) == 4 * len(prof.tasks)   # the real user re-run, the naive and the LM simulators
