"""`10_evaluate` plans its generation engines: on a GPU it builds one engine per policy, reuses it over the policy's
evaluation seeds and closes it before the next policy's is built — never one per worker or seed. A GPU engine cannot
be built here, so the engine is a stand-in: a real `HFBackend` over a tiny model built locally, subclassed only to
count its constructions and closes. Counting is the property under test, so a stand-in that counts is the honest
check; the evaluation around it (rollouts with the scripted human, the verifier, the results' order) is the package's own."""
import pytest
from calirl.backends import HFBackend
from calirl.evaluate import EvalJob, plan_evaluation, run_evaluation
from calirl.models import build_tiny_model, train_tokenizer
from calirl.tasks import tiny_items

class CountingEngine(HFBackend):
    "A real backend that records how many engines were built, closed, and alive at once."
    built, closed, alive, peak = 0, 0, 0, 0
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        CountingEngine.built += 1
        CountingEngine.alive += 1
        CountingEngine.peak = max(CountingEngine.peak, CountingEngine.alive)
    def close(self):
        CountingEngine.closed += 1
        CountingEngine.alive -= 1

@pytest.fixture(scope="module")
def policies():
    "Two tiny policies, by the name an EvalJob gives them (built here; nothing is downloaded)."
    items = tiny_items("math-chat", "eval", 2)
    tok = train_tokenizer([it.x for it in items] + ["the answer is 7 .", "how many more ?"], 300)
    return {name: build_tiny_model(tok, "qwen2", 32, 1, "policy", seed) for name, seed in (("pol-a", 0), ("pol-b", 1))}, items

def _jobs(items, device):
    "2 policies × 3 evaluation seeds, seeds outer as 10_evaluate lists them."
    return [EvalJob(f"M{m}", m, s, {"math-chat": items}, dict(kind="scripted-human"), dict(kind="verifier"), H=2, max_new_tokens=8,
                    temperature=0.8, device=device, dtype="float32", policy_prompt="plain") for s in (0, 1, 2) for m in ("pol-a", "pol-b")]

def _build(models):
    "What `generation_backend` is to the notebook: the engine for a policy name (`generate`'s engine, no prefix cache across calls)."
    return lambda model, backend, device, dtype, cache=None: CountingEngine(*models[model], engine="generate")

def _run(models, items, device, workers):
    CountingEngine.built = CountingEngine.closed = CountingEngine.alive = CountingEngine.peak = 0
    out = run_evaluation(_jobs(items, device), workers=workers, device=device, build=_build(models))
    return out, (CountingEngine.built, CountingEngine.closed, CountingEngine.peak)

def test_one_engine_per_policy_on_a_gpu_reused_over_seeds_and_released(policies):
    models, items = policies
    gpu, counts = _run(models, items, "cuda", 0)                   # the plan a GPU gets (nothing here touches a GPU)
    assert counts == (2, 2, 1), counts                             # 2 engines for 2 policies × 3 seeds, both closed, one alive at a time
    jobs = _jobs(items, "cuda")
    assert [(df.method.unique().tolist(), df.seed.unique().tolist()) for df, _ in gpu] == [([j.method], [j.seed]) for j in jobs]   # in the jobs' order
    cpu, counts = _run(models, items, "cpu", 1)                    # one worker: here, where the engines can be counted
    assert counts == (6, 6, 1), counts                             # the CPU's plan: one engine per job
    for (a, ta), (b, tb) in zip(gpu, cpu):                          # an engine reused over seeds samples what fresh ones sample
        assert a.equals(b) and [t.messages for *_, t in ta] == [t.messages for *_, t in tb]

def test_the_plan_groups_by_policy_only_off_the_cpu():
    jobs = _jobs([], "cuda")
    assert plan_evaluation(jobs, "cuda") == [[0, 2, 4], [1, 3, 5]]
    assert plan_evaluation(jobs, "cpu") == [[k] for k in range(6)]
