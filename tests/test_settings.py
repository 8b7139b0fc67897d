"""Typed setting groups (`calirl.core`): a notebook's GRPO and per-task keys reach the functions that use them as one
typed, checked value, the same whether built from a profile or from the notebook's parameters, never re-packed by hand."""
import json, pickle, re
from dataclasses import replace
import pytest
from conftest import ROOT
from calirl.core import GRPOSettings, PER_TASK_KEYS, PerTask, ProfileError, load_profile
from calirl.pipeline import declared_parameters, list_notebooks

SMOKE = load_profile("smoke", ROOT / "settings.ini")
NOTEBOOKS = {p.stem: p for p in list_notebooks(ROOT)}
GRPO_KEYS = [k for k in GRPOSettings.__dataclass_fields__ if k != "rollout_backend"]


def _code_cells(nb):
    "Source of every code cell of notebook `nb` but its parameters cell."
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and "parameters" not in c.get("metadata", {}).get("tags", [])]


@pytest.mark.parametrize("name", ["09_grpo", "12_validity", "13_ablation"])
def test_grpo_settings_same_from_profile_and_notebook(name):
    params = declared_parameters(NOTEBOOKS[name])
    fixed = {} if "rollout_backend" in params else {"rollout_backend": "hf"}   # 12 and 13 always generate with HF
    assert GRPOSettings.of(params, **fixed) == GRPOSettings.of(SMOKE)


@pytest.mark.parametrize("name", ["06_simulator_sft", "09_grpo", "09a_collabllm", "12_validity", "13_ablation"])
def test_per_task_same_from_profile_and_notebook(name):
    params = declared_parameters(NOTEBOOKS[name])
    keys = [k for k in PER_TASK_KEYS if f"{k}_math" in params and f"{k}_docedit" in params]
    assert keys
    for k in keys: assert PerTask.of(params, k) == PerTask.of(SMOKE, k)


def test_bad_values_are_refused_with_the_schema_message():
    params = {k: getattr(SMOKE, k) for k in GRPO_KEYS + ["rollout_backend", "max_len_math", "max_len_docedit"]}
    with pytest.raises(ProfileError, match=r"notebook parameters: `grpo_lr` = 0.0 is out of range \(0, 1\]"):
        GRPOSettings.of({**params, "grpo_lr": 0.0})
    with pytest.raises(ProfileError, match="`G` must be an integer"):
        GRPOSettings.of({**params, "G": "4"})
    with pytest.raises(ProfileError, match="must be a multiple of `G`"):
        GRPOSettings.of({**params, "grpo_batch": 6})
    with pytest.raises(ProfileError, match="`device` = 'tpu' is not allowed"):
        replace(GRPOSettings.of(params), device="tpu")
    with pytest.raises(ProfileError, match=r"`max_len_math` = 4 is out of range \[16, 131072\]"):
        PerTask.of({**params, "max_len_math": 4}, "max_len")
    assert GRPOSettings.of({**params, "kl_beta": 0}).kl_beta == 0.0 and type(GRPOSettings.of({**params, "kl_beta": 0}).kl_beta) is float


def test_groups_are_frozen_and_pickle():
    from dataclasses import FrozenInstanceError
    g, ml = GRPOSettings.of(SMOKE), PerTask.of(SMOKE, "max_len")
    with pytest.raises(FrozenInstanceError): g.G = 8
    with pytest.raises(FrozenInstanceError): ml.math = 8
    assert pickle.loads(pickle.dumps(g)) == g and pickle.loads(pickle.dumps(ml)) == ml
    assert ml["math-chat"] == SMOKE.max_len_math and dict(ml) == {"math-chat": SMOKE.max_len_math, "docedit-chat": SMOKE.max_len_docedit}


def test_ablation_cell_spec_pickles():
    "The ablation sends its cells to spawned workers: a spec must survive pickling unchanged."
    from calirl.ablation import CellSpec, cell_name
    spec = CellSpec("mix", "verdict", None, GRPOSettings.of(SMOKE, rollout_backend="hf"), 2, PerTask.of(SMOKE, "max_len"),
                    ("math-chat",), 64, 4, 0, 3, 0.8, 0.1, "runs/smoke/policy", "runs/smoke/checkpoints", None)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert cell_name(spec) == "mix-verdict-seed0"


PACKED = [re.compile(r'"(math|docedit)-chat"\s*[:,]\s*(' + "|".join(PER_TASK_KEYS) + r")_(math|docedit)"),   # {"math-chat": max_len_math, …}
          re.compile(r"\bMAX_LEN\b"),
          re.compile(r"\b(grpo_batch|grpo_lr|adam_beta[12]|eps_low|eps_high|kl_beta|train_temperature)\s*=\s*\1\b")]   # grpo_lr=grpo_lr, …

@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_no_notebook_repacks_profile_keys_by_hand(name):
    "Per-task keys and GRPO keys reach functions as typed groups (`PerTask.of`, `GRPOSettings.of`), not as dicts written out."
    bad = [m.group(0) for src in _code_cells(NOTEBOOKS[name]) for p in PACKED for m in p.finditer(src)]
    assert not bad, f"{name} re-packs profile keys by hand: {bad[:5]}"
