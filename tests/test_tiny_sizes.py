"""The float checks that depend on a model's size pass at the sizes the main job uses, on this machine's kernels and on
kernels pinned to another instruction set. The smoke run, which the rest of the suite reads, builds smaller models
(hidden 32, one layer): a check whose rounding grows with the model would pass there and fail in `calirl reproduce
--profile tiny` — as `04a`'s compaction check once did on an AVX-512 machine."""
import pytest
from conftest import TINY_SIZE_NOTEBOOKS
from calirl.settings import load_profile
from calirl.pipeline import read_state

def _check(run, label):
    proj, r = run
    st = read_state(proj / "runs" / "tiny")
    for nb in TINY_SIZE_NOTEBOOKS:
        assert st.get(nb, {}).get("status") == "ok", (f"{nb} at the tiny sizes, {label}: {st.get(nb) or 'never ran'}\n"
                                                        f"{r.stdout[-3000:]}\n{r.stderr[-4000:]}")

def test_tiny_profile_builds_larger_models_than_smoke():
    "The reason this file exists: the main job's models are larger than smoke's."
    tiny, smoke = load_profile("tiny"), load_profile("smoke")
    assert tiny.tiny_hidden > smoke.tiny_hidden and tiny.tiny_layers >= smoke.tiny_layers

def test_size_dependent_checks_pass_at_tiny_sizes(tiny_sizes_native):
    _check(tiny_sizes_native, "this machine's kernels")

def test_size_dependent_checks_pass_on_generic_kernels(tiny_sizes_generic_kernels):
    _check(tiny_sizes_generic_kernels, "MKL_CBWR=COMPATIBLE, ATEN_CPU_CAPABILITY=default")
