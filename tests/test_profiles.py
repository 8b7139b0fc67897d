"""Run profiles are validated when a run is planned: every bad value, in `settings.ini` or from `-p`, stops
`calirl reproduce --dry-run` with one line that names the key and exit status 2, before any notebook runs."""
from types import SimpleNamespace
import shutil
import pytest
from conftest import ROOT, calirl
from calirl.cli import main

BAD = [  # (key=value, what the one line must say besides the key)
    ("grpo_lr=nan", "finite"), ("grpo_lr=inf", "finite"), ("eps_low=-inf", "finite"), ("kl_beta=NaN", "finite"),
    ("eval_temperature=infinity", "finite"), ("dose_strengths=0.5, nan", "finite"), ("zoo_noise=inf", "finite"),
    ("grpo_lr=0", "out of range"), ("grpo_lr=-5e-6", "out of range"), ("base_lr=0", "out of range"),
    ("sft_lr=0", "out of range"), ("disc_lr=0", "out of range"), ("collabllm_dpo_lr=0", "out of range"), ("collabllm_dpo_beta=0", "out of range"), ("dial_dpo_beta=0", "out of range"),
    ("dpo_beta=0.1", "was renamed to `collabllm_dpo_beta` / `dial_dpo_beta`"), ("dpo_lr=5e-5", "was renamed to `collabllm_dpo_lr`"),
    ("adam_beta2=1", "out of range"),
    ("seed=-1", "out of range"), ("eval_seeds=0, -1", "out of range"), ("ablation_seeds=-3", "out of range"),
    ("grpo_batch=10", "multiple of `G`"),
    ("tasks=", "empty"), ("eval_seeds=", "empty"), ("eval_seeds= , ", "empty"), ("ablation_tasks=", "empty"),
    ("ablation_seeds=", "empty"), ("zoo_steps=", "empty"), ("zoo_noise=", "empty"), ("dose_strengths=", "empty"),
    ("G=100000000000000000000", "out of range"), ("H=1000000", "out of range"), ("grpo_batch=10000000000", "out of range"),
    ("max_len_math=10000000000", "out of range"), ("n_oracle_docedit=10000000000", "out of range"),
    ("zoo_steps=0, 2", "out of range"), ("train_runs=0", "out of range"), ("train_runs=1.5", "integer"),
    ("upstream_run=../x", "runs/"), ("upstream_run=/abs/path", "runs/"), ("upstream_run=tiny/../../etc", "runs/"),
    ("upstream_run=..", "runs/"), ("upstream_run=a\\b", "runs/"),
]

def _key(kv): return kv.partition("=")[0]

def _one_line_naming(r, key, needle):
    "Exit 2, nothing on stdout, exactly one line on stderr that names `key` and says `needle`, and no traceback."
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("calirl: error:"), r.stderr
    assert f"`{key}`" in lines[0] and needle in lines[0], r.stderr

@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    "A project folder with the real settings.ini and an empty nbs/: profiles are checked before notebooks are listed."
    d = tmp_path_factory.mktemp("profiles") / "proj"
    (d / "nbs").mkdir(parents=True)
    (d / "settings.ini").write_text((ROOT / "settings.ini").read_text())
    return d

@pytest.mark.parametrize("kv,needle", BAD, ids=[kv for kv, _ in BAD])
def test_bad_override_gets_one_line_and_exit_2(proj, kv, needle):
    _one_line_naming(calirl("reproduce", "--profile", "smoke", "--dry-run", "-p", kv, "--root", proj, cwd=proj), _key(kv), needle)

def _in_process(capsys, *args) -> SimpleNamespace:
    "`calirl *args` run in this process (the console script's `main`), as a finished process would report it."
    try: code = main([str(a) for a in args])
    except SystemExit as e: code = e.code
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

@pytest.mark.parametrize("kv,needle", BAD, ids=[kv for kv, _ in BAD])
def test_bad_value_in_settings_ini_gets_one_line_and_exit_2(tmp_path, capsys, kv, needle):
    (tmp_path / "nbs").mkdir()
    k, _, v = kv.partition("=")
    (tmp_path / "settings.ini").write_text((ROOT / "settings.ini").read_text() + f"\n[bad]\ninherit = smoke\n{k} = {v}\n")
    _one_line_naming(_in_process(capsys, "reproduce", "--profile", "bad", "--dry-run", "--root", tmp_path), k, needle)

@pytest.mark.parametrize("profile", ["tiny", "smoke", "ablation", "validity", "paper", "paper-mini"])
def test_every_profile_of_the_project_validates(profile):
    r = calirl("reproduce", "--profile", profile, "--dry-run", "--root", ROOT, cwd=ROOT)
    assert r.stdout.startswith(f"profile [{profile}]"), r.stdout[:300]
    if profile != "paper":
        assert r.returncode == 0 and r.stderr == "", r.stderr
        return
    # [paper] on a machine without a GPU or an oracle/judge endpoint: valid, and refused by the preflight for just those two reasons
    assert r.returncode == 2, r.stderr
    keys = {l.split("`")[1] for l in r.stderr.splitlines()}
    import importlib.util
    assert keys == {"openai_base_url"} | ({"device"} if shutil.which("nvidia-smi") is None else set()) \
        | ({"rollout_backend"} if importlib.util.find_spec("vllm") is None else set()), r.stderr

@pytest.mark.parametrize("profile,needle", [("paper", "device"), ("paper-mini", "serve")])
def test_side_by_side_notebooks_only_on_the_cpu_without_serve(proj, profile, needle):
    "On GPUs every notebook takes all of them, and serving notebooks share one port: `notebook_workers` > 1 is refused there."
    _one_line_naming(calirl("reproduce", "--profile", profile, "--dry-run", "-p", "notebook_workers=2", "--root", proj, cwd=proj),
                     "notebook_workers", needle)

@pytest.mark.parametrize("kv", ["grpo_batch=12", "upstream_run=tiny", "upstream_run=my-run_2.b", "seed=4294967295",
                                "grpo_lr=1e-7", "kl_beta=0", "eval_temperature=0", "H=100"])
def test_good_overrides_at_the_edges_still_plan(kv):
    r = calirl("reproduce", "--profile", "smoke", "--dry-run", "-p", kv, "--root", ROOT, cwd=ROOT)
    assert r.returncode == 0, r.stderr
