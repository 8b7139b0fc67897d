"""The `calirl` command: fast start, clear errors, a real smoke reproduction, resume, failure and interrupt."""
import errno, json, os, signal, subprocess, sys, time
from pathlib import Path
import nbformat, pytest
from conftest import ROOT, BIN, calirl, copy_project
from calirl.settings import load_profile
from calirl.pipeline import PHASE_COLUMNS

def _one_clear_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("calirl: error:"), r.stderr
    for n in needles: assert n in r.stderr, (n, r.stderr)

def _state(proj, profile="smoke"):
    return json.loads((proj / "runs" / profile / "state.json").read_text())

def _add_nb(proj, name, *cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    p = nbformat.v4.new_code_cell('run_dir = "../runs/smoke"'); p.metadata["tags"] = ["parameters"]
    nb.cells = [p] + [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, proj / "nbs" / name)

def test_light_commands_never_import_heavy_modules():
    code = ("import sys; from calirl.cli import main\n"
            f"assert main(['profiles', '--keys', '--root', {str(ROOT)!r}]) == 0\n"
            f"assert main(['reproduce', '--profile', 'paper', '--dry-run', '--root', {str(ROOT)!r}]) == 2\n"   # the preflight refuses [paper] on a CPU
            "heavy = [m for m in ('torch', 'transformers', 'papermill', 'pandas', 'numpy') if m in sys.modules]\n"
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "grpo_lr" in r.stdout and "profile [paper]" in r.stdout

def test_profiles_lists_every_profile():
    r = calirl("profiles", cwd=ROOT)
    assert r.returncode == 0
    assert [l.split()[0] for l in r.stdout.splitlines()][:3] == ["tiny", "smoke", "paper"]

def test_dry_run_paper_prints_plan_and_runs_nothing(project):
    r = calirl("reproduce", "--profile", "paper", "--dry-run", cwd=project / "nbs")   # found from a subfolder
    assert r.returncode == 2, r.stderr                                          # no GPU and no endpoint here: the preflight says so
    assert r.stderr and all(l.startswith("calirl: error: preflight: ") for l in r.stderr.splitlines()), r.stderr
    paper, tiny = (load_profile(n, project / "settings.ini") for n in ("paper", "tiny"))
    settings = " ".join(r.stdout.split("\nsettings: ")[1].split("runs →")[0].split()) + ","   # the profile's settings, as the plan prints them
    for k in ("G", "grpo_batch", "grpo_lr", "max_new_tokens", "device", "rollout_backend"):
        assert getattr(paper, k) != getattr(tiny, k), k                         # a value only [paper] has
        assert f" {k}={getattr(paper, k)}," in settings, (k, settings)
    assert r.stdout.split("] 09_grpo ")[1].splitlines()[1].strip() == "reads: not recorded yet (fingerprinted by every key)"
    assert "estimated total of the notebooks to run:" in r.stdout and "GPU-hours" in r.stdout   # a GPU profile gets a cost estimate
    assert r.stdout.count("runs only in world = tiny") == 3                    # 10a, 12 and 13 are refused outside the tiny world
    assert f"{len(list((project / 'nbs').glob('[0-9]*.ipynb'))) - 3} notebook(s) to run, 0 up to date" in r.stdout
    assert not (project / "runs" / "paper").exists()

def test_bad_inputs_get_one_clear_error(project, tmp_path):
    _one_clear_error(calirl("reproduce", "--profile", "tinny", cwd=project), "unknown profile 'tinny'", "did you mean `tiny`", "valid profiles: tiny, smoke, paper")
    _one_clear_error(calirl("reproduce", "-p", "Gee=3", cwd=project), "unknown key `Gee`", "valid keys:")
    _one_clear_error(calirl("reproduce", "-p", "G=three", cwd=project), "`G` must be an integer, got 'three'")
    _one_clear_error(calirl("reproduce", "-p", "device=tpu", cwd=project), "choose from cpu, cuda, auto")
    _one_clear_error(calirl("reproduce", "-p", "G", cwd=project), "key=value")
    _one_clear_error(calirl("reproduce", "--only", "99_none", cwd=project), "does not exist", "choose from 00_core")
    _one_clear_error(calirl("reproduce", "--only", "00", "--from", "00", cwd=project), "not both")
    _one_clear_error(calirl("reproduce", "--dry-run", cwd=tmp_path), "no calirl project")
    ini = project / "settings.ini"
    ini.write_text(ini.read_text().replace("[smoke]\n", "[smoke]\nsed = 3\n"))
    _one_clear_error(calirl("profiles", cwd=project), "[smoke] has unknown key `sed`", "did you mean `seed`")

def test_time_profile_splits_each_notebook_into_phases(smoke_reproduction):
    "The run's time profile lists every notebook; training notebooks show generation and optimizer steps, pooled ones their pool's time; no phase sum exceeds its notebook."
    import pandas as pd
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    tp = pd.read_csv(project / "figures/smoke/time_profile.csv").set_index("notebook")
    names = [p.stem for p in sorted((project / "nbs").glob("[0-9]*.ipynb"))]
    assert set(names) | {"total"} == set(tp.index), tp.index
    assert tp.loc["04c_base_policy", "generation"] > 0 and tp.loc["04c_base_policy", "training_step"] > 0, tp.loc["04c_base_policy"]
    assert tp.loc["06_simulator_sft", "generation"] > 0, tp.loc["06_simulator_sft"]   # its oracle traces
    assert (tp.drop("total")["scoring"] > 0).any(), tp                  # rewards are timed somewhere
    assert (tp.loc[["07_dial", "08_realism"], "scoring"] > 0).all(), tp  # and so are the discriminators' P(real) and MAUVE
    pooled = ["06_simulator_sft", "09_grpo", "09b_grpo_calibrated", "10_evaluate", "13_ablation"]   # their independent runs go to `calirl.runtime.pmap` ([smoke]: two Phase I simulators)
    held = {n: e.get("cores", 1) for n, e in _state(project).items()}   # the cores the scheduler gave each notebook
    in_pool = [n for n in pooled if held[n] > 1]                        # workers = 0: a pool of one process per core it was given
    assert (tp.loc[in_pool, "workers"] > 0).all(), tp                   # time in the pool is its own phase
    alone = [n for n in ("06_simulator_sft", "09_grpo", "09b_grpo_calibrated") if n not in in_pool]
    assert (tp.loc[alone, "training_step"] > 0).all(), tp              # one core: they train in the notebook
    assert (tp.loc["04c_base_policy", ["rollout", "forward", "backward"]] > 0).all(), tp.loc["04c_base_policy"]   # its demos' loop, its SFT's passes
    phases = tp[list(PHASE_COLUMNS)].sum(axis=1)
    assert (phases <= tp["seconds"] + 0.2).all(), tp                  # exclusive phases never double-count
    pp = pd.read_csv(project / "figures/smoke/time_profile_pools.csv").set_index("notebook")
    grpo = [n for n in ("09_grpo", "09b_grpo_calibrated") if n in in_pool]
    for n in grpo:                                                      # the jobs' own phases came back from the pool
        assert (pp.loc[n, ["generation", "rollout", "forward", "backward", "training_step"]] > 0).all(), pp
    if "10_evaluate" in in_pool: assert pp.loc["10_evaluate", "generation"] > 0, pp
    if in_pool:
        cols = [c for c in PHASE_COLUMNS if c != "workers"]
        assert (pp[cols].sum(axis=1) <= pp["jobs"] + 0.2).all(), pp    # a job's phases never exceed the job
        assert (pp.drop("total")["workers"] <= tp.loc[pp.drop("total").index, "seconds"]).all(), (pp, tp)
    assert not {"09_grpo", "09b_grpo_calibrated"} - set(grpo) & set(pp.index), pp   # given one core: GRPO trains in the notebook
    assert abs(tp.loc["total", "seconds"] - tp.drop("total")["seconds"].sum()) < 0.5

def test_overrides_reach_the_first_notebook(project):
    "`-p` on the keys `00_core` reads (its seed, its tasks): the notebook reads the profile as overridden and passes."
    r = calirl("reproduce", "--profile", "smoke", "--only", "00_core", "-p", "seed=1", "-p", "tasks=math-chat", cwd=project)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((project / "runs" / "smoke" / "notebooks" / "00_core.run.json").read_text())["status"] == "ok"


def test_reproduce_smoke_then_rerun_does_no_work(smoke_reproduction):
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    assert "without encryption" not in r.stderr, r.stderr[-5000:]                # kernels talk over IPC, quietly
    st = _state(project)
    names = [p.stem for p in sorted((project / "nbs").glob("[0-9]*.ipynb"))]
    assert sorted(st) == names and all(v["status"] == "ok" for v in st.values()), st
    outs = {n: (project / "runs/smoke/notebooks" / f"{n}.ipynb").stat().st_mtime_ns for n in names}
    r2 = calirl("reproduce", "--profile", "smoke", cwd=project)
    assert r2.returncode == 0 and "nothing to run" in r2.stderr, r2.stderr
    assert outs == {n: (project / "runs/smoke/notebooks" / f"{n}.ipynb").stat().st_mtime_ns for n in names}
    r3 = calirl("reproduce", "--profile", "smoke", "--only", "00b", "--force", cwd=project)
    assert r3.returncode == 0 and "[1/1] 00b_cli" in r3.stderr, r3.stderr

def _side_by_side_problems(log:str, names:list[str], cores:int) -> list[str]:
    "What is wrong with a run's progress lines (`[k/N] name … (c cores)` at a start, `✓ name` at an end): a notebook started before one it waits for ended, or the notebooks running at once held more than `cores` cores; also whether any two overlapped."
    import re
    from calirl.pipeline import waits_for
    events = []
    for line in log.splitlines():
        if m := re.fullmatch(r"\[\d+/\d+\] (\S+) … \((\d+) cores?\)", line): events.append(("start", m[1], int(m[2])))
        elif line.startswith("✓ "): events.append(("end", line.split()[1], 0))
    ended, running, most, held, bad = set(), {}, 0, 0, []
    for kind, n, k in events:
        if kind == "end":
            running.pop(n, None)
            ended.add(n)
            continue
        missing = waits_for(n, names) - ended
        if missing: bad.append(f"{n} started before {sorted(missing)} ended")
        running[n] = k
        most = max(most, len(running))
        held = max(held, sum(running.values()))
    if held > cores: bad.append(f"{held} cores held at once, of {cores}")
    if most < 2: bad.append("no two ran at once")
    if ended != set(names): bad.append(f"not all ended: {sorted(set(names) - ended)}")
    return bad

def test_side_by_side_notebooks_wait_for_what_they_read(smoke_reproduction):
    "[smoke] runs notebooks side by side on the cores: by its progress lines, none started before the notebooks it waits for had ended, two did run at once, and never did they hold more cores than there are."
    import os
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    cores = len(os.sched_getaffinity(0))
    assert load_profile("smoke", project / "settings.ini").notebook_workers == 0
    assert f"side by side on {cores} cores" in r.stderr.splitlines()[0], r.stderr[:300]
    names = [p.stem for p in sorted((project / "nbs").glob("[0-9]*.ipynb"))]
    assert _side_by_side_problems(r.stderr, names, cores) == [], r.stderr
    assert _side_by_side_problems("[1/2] 08_realism … (1 core)\n✓ 08_realism 1 s\n[2/2] 07_dial … (2 cores)\n✓ 07_dial 1 s", ["07_dial", "08_realism"], 2)  # the check can fail
    assert _side_by_side_problems("[1/2] 00b_cli … (1 core)\n[2/2] 07_dial … (2 cores)\n✓ 00b_cli 1 s\n✓ 07_dial 1 s", ["00b_cli", "07_dial"], 2)  # more cores than there are
    st = _state(project)                                                # the state says when each ran (a later test reruns 00b)
    assert all(st[n]["started_at"] < st[n]["finished_at"] for n in names), st

def test_failing_notebook_names_cell_and_executed_copy(project):
    _add_nb(project, "99_fail.ipynb", "x = 1", "raise ValueError('broken on purpose')")
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_fail", cwd=project)
    assert r.returncode == 1
    out = project / "runs/smoke/notebooks/99_fail.ipynb"
    assert "notebook 99_fail failed in cell 2 of nbs/99_fail.ipynb (`raise ValueError('broken on purpose')`)" in r.stderr, r.stderr
    assert "ValueError: broken on purpose" in r.stderr and str(out) in r.stderr, r.stderr
    assert out.exists() and _state(project)["99_fail"]["status"] == "failed"

def test_interrupted_run_resumes_without_redoing_work(project):
    flag = project / "slow.flag"; flag.touch()
    _add_nb(project, "99_slow.ipynb",
            "import time\nfrom pathlib import Path\nfrom calirl.artifacts import atomic_path\n"
            f"flag = Path({str(flag)!r})\n"
            "with atomic_path(Path(run_dir) / 'artifacts' / 'slow.txt') as t:\n"
            "    t.write_text('half')\n"
            "    (Path(run_dir) / 'started').touch()\n"
            "    while flag.exists(): time.sleep(0.2)\n"
            "    t.write_text('whole')")
    started = project / "runs/smoke/started"
    p = subprocess.Popen([str(BIN / "calirl"), "reproduce", "--profile", "smoke", "--only", "00_core", "99_slow"], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # a foreground run, even when the suite runs in the background (`&` ignores SIGINT)
    t0 = time.time()
    while not started.exists():
        assert p.poll() is None, p.communicate()
        assert time.time() - t0 < 300, "the slow notebook never started"
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted during 99_slow" in err, err
    st = _state(project)
    assert st["99_slow"]["status"] == "interrupted" and st["00_core"]["status"] == "ok", st
    assert not (project / "runs/smoke/artifacts/slow.txt").exists()          # no half-written artifact
    flag.unlink()
    r = calirl("reproduce", "--profile", "smoke", "--only", "00_core", "99_slow", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "[1/1] 99_slow" in r.stderr, r.stderr                               # only the unfinished notebook ran
    assert (project / "runs/smoke/artifacts/slow.txt").read_text() == "whole"
    assert not list((project / "runs/smoke/artifacts").glob(".*tmp-*"))      # stale temporaries swept

def test_running_part_of_a_plan_names_the_stale_notebooks_it_reads(project):
    "`--only` a notebook whose upstream changed since its last run: the run and the dry run say which one, once; bringing it along says nothing."
    _add_nb(project, "99_make.ipynb", "from pathlib import Path", "(Path(run_dir) / 'made.txt').write_text('one')")
    _add_nb(project, "99_read.ipynb", "from pathlib import Path", "print((Path(run_dir) / 'made.txt').read_text())")
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_make", "99_read", cwd=project)
    assert r.returncode == 0 and "⚠" not in r.stderr, r.stderr
    _add_nb(project, "99_make.ipynb", "from pathlib import Path", "(Path(run_dir) / 'made.txt').write_text('two')")   # its code changes
    d = calirl("reproduce", "--profile", "smoke", "--only", "99_read", "--force", "--dry-run", cwd=project)
    assert d.returncode == 0 and "⚠ 99_read reads what 99_make made, not up to date" in d.stdout, d.stdout
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_read", "--force", cwd=project)
    warned = [l for l in r.stderr.splitlines() if l.startswith("⚠")]
    assert r.returncode == 0 and len(warned) == 1 and "--from 99_make" in warned[0], r.stderr
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_make", cwd=project)             # brought up to date…
    assert r.returncode == 0 and "⚠" not in r.stderr, r.stderr
    d = calirl("reproduce", "--profile", "smoke", "--dry-run", cwd=project)                     # …what read its old output runs again
    assert "99_read                run" in d.stdout and "99_make                done" in d.stdout and "⚠" not in d.stdout, d.stdout

def _ok_run(project):
    "A one-notebook project run that succeeds: (run dir, executed copy, first result)."
    _add_nb(project, "99_ok.ipynb", "from pathlib import Path", "(Path(run_dir) / 'ok.txt').write_text('ok')")
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_ok", cwd=project)
    assert r.returncode == 0 and _state(project)["99_ok"]["status"] == "ok", r.stderr
    return project / "runs/smoke", project / "runs/smoke/notebooks/99_ok.ipynb", r

@pytest.fixture(scope="module")
def _ok_template(tmp_path_factory):
    "One `_ok_run` project for the module (each run starts a kernel); the tests below damage copies of it."
    project = copy_project(tmp_path_factory.mktemp("ok") / "proj")
    _ok_run(project)
    return project

@pytest.fixture
def ok_project(_ok_template, tmp_path):
    "A copy of the module's succeeded one-notebook run (times kept): (project, run dir, executed copy)."
    import shutil
    project = shutil.copytree(_ok_template, tmp_path / "proj", symlinks=True)
    assert _state(project)["99_ok"]["status"] == "ok"
    return project, project / "runs/smoke", project / "runs/smoke/notebooks/99_ok.ipynb"

def test_kernel_runs_quietly_one_progress_line_per_notebook(project):
    noisy = ("import os, subprocess, sys\nos.write(2, b'a C library warns\\n')\n"
             "subprocess.run([sys.executable, '-c', 'import sys; print(\"a worker warns\", file=sys.stderr)'])")
    _add_nb(project, "99_noisy.ipynb", noisy)
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_noisy", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "without encryption" not in r.stdout + r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 4 and lines[0].startswith("calirl reproduce [smoke]: 1 to run"), lines   # nothing but progress
    assert lines[1] == "[1/1] 99_noisy …" and lines[2].startswith("✓ 99_noisy ") and lines[3].startswith("done in"), lines
    log = (project / "runs/smoke/notebooks/99_noisy.log").read_text()
    assert "a C library warns" in log and "a worker warns" in log, log                # kept, not lost

@pytest.mark.parametrize("damage", [b'{"99_ok": {"status": "ok", "finger', b"\x89PNG\r\n\x1a garbage", b"", b"[]", b'{"x": 3}'],
                         ids=["truncated", "garbage", "empty", "list", "wrong-shape"])
def test_damaged_state_is_set_aside_and_done_work_recovered(ok_project, damage):
    project, run_dir, out = ok_project
    before = out.stat().st_mtime_ns
    (run_dir / "state.json").write_bytes(damage)
    d = calirl("reproduce", "--profile", "smoke", "--only", "99_ok", "--dry-run", cwd=project)
    assert d.returncode == 0 and "Traceback" not in d.stderr and len(d.stderr.splitlines()) == 1, d.stderr
    assert "state.json is damaged" in d.stderr and "99_ok                  done" in d.stdout, (d.stderr, d.stdout)
    assert (run_dir / "state.json").read_bytes() == damage                      # a dry run changes nothing
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_ok", cwd=project)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "nothing to run" in r.stderr and sum("set aside" in l for l in r.stderr.splitlines()) == 1, r.stderr
    kept = list(run_dir.glob("state.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == damage and kept[0].name in r.stderr, kept
    assert out.stat().st_mtime_ns == before and _state(project)["99_ok"]["status"] == "ok"   # nothing reran

def test_stale_temporaries_and_old_folders_are_swept(project):
    art = project / "runs/smoke/artifacts"
    for stale in (art / ".model.old-1234abcd", art / "sub/.x.parquet.old-9f9f9f9f", art / ".y.json.tmp-5678abcd"):
        stale.mkdir(parents=True)
        (stale / "weights.bin").write_text("left by an interrupted swap")
    _ok_run(project)
    assert not [p.name for p in art.rglob(".*.old-*")] + [p.name for p in art.rglob(".*.tmp-*")]

def test_non_utf8_settings_is_one_line(project):
    ini = project / "settings.ini"
    ini.write_bytes(ini.read_bytes().replace(b"[smoke]\n", b"[smoke]\n# caf\xe9 latin-1\n"))
    for args in (("profiles",), ("reproduce", "--dry-run")):
        _one_clear_error(calirl(*args, cwd=project), "settings.ini is not UTF-8")

def test_runs_that_cannot_be_created_is_one_line(project):
    _add_nb(project, "99_ok.ipynb", "x = 1")
    (project / "runs").write_text("a file where the runs folder should be")
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_ok", cwd=project)
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("calirl: error: cannot write") and "runs" in r.stderr, r.stderr

@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores a read-only folder's permissions; the test above covers an unwritable runs/")
def test_read_only_runs_is_one_line(project):
    _add_nb(project, "99_ok.ipynb", "x = 1")
    (project / "runs").mkdir()
    (project / "runs").chmod(0o555)
    try: r = calirl("reproduce", "--profile", "smoke", "--only", "99_ok", cwd=project)
    finally: (project / "runs").chmod(0o755)
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr

_FULL_DISK = """
import errno, sys
import papermill.iorw as io
def full(self, buf, path):
    with open(path, "w") as f: f.write(buf[: len(buf) // 2])
    raise OSError(errno.ENOSPC, "No space left on device", path)
io.LocalHandler.write = full
import calirl.pipeline
def no_state(obj, path): raise OSError(errno.ENOSPC, "No space left on device", str(path))
if sys.argv[1] == "state": calirl.pipeline.save_json = no_state
from calirl.cli import main
sys.exit(main(["reproduce", "--profile", "smoke", "--only", "99_ok", "--force"]))
"""

@pytest.mark.parametrize("what", ["notebook", "state"])
def test_full_disk_is_one_line_and_loses_nothing(ok_project, what):
    project, run_dir, out = ok_project
    copy, state = out.read_bytes(), (run_dir / "state.json").read_bytes()
    r = subprocess.run([sys.executable, "-c", _FULL_DISK, what], cwd=project, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "No space left on device" in r.stderr, r.stderr
    assert sum(l.startswith(("✗", "calirl: error")) for l in r.stderr.splitlines()) == 1, r.stderr
    assert out.read_bytes() == copy                                              # the previous executed copy is whole
    assert not list((run_dir / "notebooks").glob(".*tmp-*")), list((run_dir / "notebooks").iterdir())
    json.loads((run_dir / "state.json").read_text())
    if what == "state": assert (run_dir / "state.json").read_bytes() == state

@pytest.mark.parametrize("arg", ["--n=0", "--rounds=-1", "--max-new-tokens=0", "--hidden=-3", "--layers=0", "--n=two", "--repeats=0"])
def test_bench_rejects_non_positive_sizes(arg):
    r = calirl("bench", "rollout", "--n=1", arg, cwd=ROOT)                      # the last --n wins
    _one_clear_error(r, f"argument {arg.split('=')[0]}")
    assert len(r.stderr.splitlines()) == 1, r.stderr

def test_compare_reads_a_real_run_against_itself_and_a_changed_copy(smoke_reproduction, tmp_path):
    "`calirl compare` on the smoke run's tables: every table it wrote is identical to itself; a changed copy names the table and column."
    import shutil
    import pandas as pd
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    fig, state = project / "figures/smoke", project / "runs/smoke/state.json"
    n = len([p for p in fig.iterdir() if p.suffix in (".csv", ".md")])
    same = calirl("compare", fig, fig, "--state", state, cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith(f"{n} tables compared") and f"{n} byte-identical, 0 differ" in same.stdout, same.stdout
    copy = shutil.copytree(fig, tmp_path / "copy")
    t2 = pd.read_csv(copy / "table2.csv")
    t2.loc[0, "Average"] = "99.9 ± 0.0"                                 # one number of Table 2 changed
    t2.to_csv(copy / "table2.csv", index=False)
    (copy / "claims.md").unlink()
    diff = calirl("compare", copy, fig, cwd=tmp_path)
    assert diff.returncode == 1, diff.stderr
    assert "- `table2.csv`: differs (values differ in `Average`)" in diff.stdout, diff.stdout
    assert "- `claims.md`: only in old" in diff.stdout and f"{n - 2} byte-identical, 1 differ, 0 only in new, 1 only in old" in diff.stdout, diff.stdout

def test_a_run_that_fails_early_keeps_what_finished_after_it(project):
    ("Side by side, a notebook later in order can finish before an earlier one fails; resuming keeps it rather than "
     "redoing it (two notebooks the stage manifest lets run together, rewritten here: one fails after a pause).")
    import os
    if len(os.sched_getaffinity(0)) < 2: pytest.skip("needs two cores for two notebooks at once")
    _add_nb(project, "01a_stats.ipynb", "import time\ntime.sleep(5)", "raise ValueError('broken on purpose')")
    _add_nb(project, "02_tasks.ipynb", "from pathlib import Path", "(Path(run_dir) / 'ok.txt').write_text('ok')")
    r = calirl("reproduce", "--profile", "smoke", "--only", "01a_stats", "02_tasks", cwd=project)
    st = _state(project)
    assert r.returncode == 1 and st["01a_stats"]["status"] == "failed" and st["02_tasks"]["status"] == "ok", r.stderr
    assert st["02_tasks"]["finished_at"] < st["01a_stats"]["finished_at"], st            # the later notebook finished first
    line = lambda out: next(l for l in out.splitlines() if "02_tasks" in l)
    r = calirl("reproduce", "--profile", "smoke", "--only", "01a_stats", "02_tasks", "--dry-run", cwd=project)
    assert " done " in line(r.stdout) and " run " not in line(r.stdout), r.stdout          # up to date: not run again
