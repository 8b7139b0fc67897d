"""Settings have one home (`settings.ini`, read through the typed `calirl.settings.Profile`): no literal copies in notebooks or
the package, `-p` overrides reach TRL unchanged, and typed groups (GRPO, per-task) reach the functions that use them as one
checked value, never re-packed by hand."""
import ast, json, pickle, re
from dataclasses import replace
import pytest
from conftest import ROOT
from calirl.settings import GRPO_KEYS, GRPOSettings, PER_TASK_KEYS, PROFILE_KEYS, PerTask, ProfileError, load_profile
from calirl.pipeline import list_notebooks

SMOKE = load_profile("smoke", ROOT / "settings.ini")
NOTEBOOKS = {p.stem: p for p in list_notebooks(ROOT)}


def _code_cells(nb):
    "Source of every code cell of notebook `nb` but its parameters cell."
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and "parameters" not in c.get("metadata", {}).get("tags", [])]


def _literal(node) -> bool:
    "Whether `node` is a literal other than `None` (a setting's value written in code)."
    if isinstance(node, ast.Constant) and node.value is None: return False
    try: ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError): return False
    return True

def _literal_settings(src:str, where:str) -> list[str]:
    "Every assignment in `src` of a literal to a name that is a profile key: a second home for a setting's value."
    tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
    out = []
    for n in ast.walk(tree):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
        value = getattr(n, "value", None)
        for t in targets:
            for name in ast.walk(t):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store) and name.id in PROFILE_KEYS and value is not None and _literal(value):
                    out.append(f"{where}:{n.lineno}: {ast.unparse(n)[:100]}")
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            for arg, d in pairs:
                if arg.arg in PROFILE_KEYS and d is not None and _literal(d) and not _neutral(arg.arg, ast.literal_eval(d)):
                    out.append(f"{where}:{n.lineno}: {getattr(n, 'name', 'lambda')}({arg.arg}={ast.unparse(d)})")
    return out

# A function's parameter named after a profile key may default only to a value that says "where and how it runs" for a
# library caller (the CPU or whatever torch finds, torch's thread count, one process, no tracker, no upstream run) or
# seed 0; a default that shapes a result (G, H, token budgets, ε, vocabulary, the policy's prompt …) would be a second
# home for the setting and silently differ from the profile a notebook runs, so those parameters have none.
NEUTRAL = {"seed": {0}, "device": {"auto", "cpu"}, "dtype": {"auto"}, "threads": {0}, "processes": {0, 1}, "workers": {1},
           "report_to": {"none"}, "upstream_run": {""}}

def _neutral(key:str, value) -> bool:
    "Whether `value` (any literal, lists included) is one of `key`'s `NEUTRAL` defaults, of the same type (`True` is not `1`)."
    return any(type(value) is type(v) and value == v for v in NEUTRAL.get(key, ()))

ALLOWED = {"04c_base_policy.ipynb:4: device = 'cpu'"}   # a stub model's `.device` attribute in a demo, not the run's setting

def test_no_setting_is_written_outside_settings_ini():
    "No notebook cell (parameters cells included) and no package module assigns a literal to a profile key's name, or gives a parameter of that name a literal default that is not `NEUTRAL`: values live in settings.ini."
    bad = []
    for nb in list_notebooks(ROOT):
        for c in json.loads(nb.read_text())["cells"]:
            if c["cell_type"] == "code": bad += _literal_settings("".join(c["source"]), nb.name)
    for m in sorted((ROOT / "calirl").glob("*.py")): bad += _literal_settings(m.read_text(), m.name)
    bad = [b for b in bad if b not in ALLOWED]
    assert not bad, "settings written as literals (read them from the profile instead):\n" + "\n".join(bad)

def test_the_check_finds_a_literal_setting():
    assert _literal_settings("grpo_lr = 1e-4\nx = 3\nG: int = 8\nseed = None\nH = prof.H", "t") == ["t:1: grpo_lr = 0.0001", "t:3: G: int = 8"]
    src = "def f(x, G:int=8, seed=0, *, H=3, device='auto', max_len=None): pass\ndef g(H, dtype='float32', n=2): pass\nh = lambda policy_prompt='plain': 0\ndef k(report_to=['wandb'], processes=True): pass"
    assert sorted(_literal_settings(src, "t")) == ["t:1: f(G=8)", "t:1: f(H=3)", "t:2: g(dtype='float32')", "t:3: lambda(policy_prompt='plain')",
                                                   "t:4: k(processes=True)", "t:4: k(report_to=['wandb'])"]

def test_a_p_override_reaches_trl_unchanged(tmp_path):
    "`calirl reproduce -p KEY=VALUE` → the plan's papermill parameters → the notebook's profile → `GRPOSettings` → TRL's `GRPOConfig`."
    from calirl.settings import notebook_profile, parse_overrides
    from calirl.grpo import grpo_config
    from calirl.pipeline import make_plan
    _, steps = make_plan(ROOT, "smoke", parse_overrides(["grpo_lr=0.000123", "eps_high=0.31", "adam_beta2=0.97", "G=2", "grpo_batch=6"]))
    params = next(s for s in steps if s.name == "09_grpo").params
    assert params["profile"] == "smoke" and params["overrides"] == {"grpo_lr": "0.000123", "eps_high": "0.31", "adam_beta2": "0.97", "G": "2", "grpo_batch": "6"}
    prof = notebook_profile(params["profile"], params["overrides"], ROOT / "nbs")          # the notebook's own cell, as the kernel runs it
    assert "settings = GRPOSettings.of(prof)" in "".join(_code_cells(NOTEBOOKS["09_grpo"]))  # and 09 builds its settings from it
    cfg = grpo_config(str(tmp_path), 2, GRPOSettings.of(prof))
    assert (cfg.learning_rate, cfg.epsilon_high, cfg.adam_beta2, cfg.num_generations) == (0.000123, 0.31, 0.97, 2)
    assert cfg.epsilon == SMOKE.eps_low and cfg.beta == SMOKE.kl_beta                      # the keys not overridden: [smoke]'s


def test_bad_values_are_refused_with_the_schema_message():
    params = {k: getattr(SMOKE, k) for k in (*GRPO_KEYS, "max_len_math", "max_len_docedit")}
    with pytest.raises(ProfileError, match=r"settings: `grpo_lr` = 0.0 is out of range \(0, 1\]"):
        GRPOSettings.of({**params, "grpo_lr": 0.0})
    with pytest.raises(ProfileError, match="`G` must be an integer"):
        GRPOSettings.of({**params, "G": "4"})
    with pytest.raises(ProfileError, match="must be a multiple of `G`"):
        GRPOSettings.of({**params, "grpo_batch": 6})
    with pytest.raises(ProfileError, match="`device` = 'tpu' is not allowed"):
        GRPOSettings.of(params).changed(device="tpu")
    with pytest.raises(ProfileError, match="`device` = 'tpu' is not allowed"):
        replace(GRPOSettings.of(params), device="tpu")
    with pytest.raises(ProfileError, match=r"`max_len_math` = 4 is out of range \[16, 131072\]"):
        PerTask.of({**params, "max_len_math": 4}, "max_len")
    assert GRPOSettings.of({**params, "kl_beta": 0}).kl_beta == 0.0 and type(GRPOSettings.of({**params, "kl_beta": 0}).kl_beta) is float


def test_a_key_is_checked_once_per_profile_load(monkeypatch):
    "`load_profile` checks each key once; groups made from the profile and their per-seed copies check only what they change."
    import calirl.settings as S
    from collections import Counter
    n, check = Counter(), S.check_value
    monkeypatch.setattr(S, "check_value", lambda k, v, where: (n.update([k]), check(k, v, where))[1])
    prof = load_profile("smoke", ROOT / "settings.ini")
    g = GRPOSettings.of(prof)
    copies = [g.changed(seed=prof.seed + i) for i in range(prof.train_runs)]
    PerTask.of(prof, "max_len")
    assert n == Counter({k: 1 for k in PROFILE_KEYS}) + Counter(seed=prof.train_runs), n
    assert [c.seed for c in copies] == list(range(prof.seed, prof.seed + prof.train_runs)) and all(c.grpo_lr == prof.grpo_lr for c in copies)


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
