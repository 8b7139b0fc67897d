"""The `calirl` command: fast start, clear errors, a real smoke reproduction, resume, failure and interrupt."""
import json, os, signal, subprocess, sys, time
from pathlib import Path
import nbformat, pytest
from conftest import ROOT, BIN, calirl, copy_project

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
            f"assert main(['reproduce', '--profile', 'paper', '--dry-run', '--root', {str(ROOT)!r}]) == 0\n"
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
    assert r.returncode == 0, r.stderr
    assert "G=32" in r.stdout or "profile [paper]" in r.stdout
    assert "to run" in r.stdout and not (project / "runs" / "paper").exists()

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

def test_reproduce_smoke_then_rerun_does_no_work(smoke_reproduction):
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-5000:]
    st = _state(project)
    names = [p.stem for p in sorted((project / "nbs").glob("[0-9]*.ipynb"))]
    assert sorted(st) == names and all(v["status"] == "ok" for v in st.values()), st
    outs = {n: (project / "runs/smoke/notebooks" / f"{n}.ipynb").stat().st_mtime_ns for n in names}
    r2 = calirl("reproduce", "--profile", "smoke", cwd=project)
    assert r2.returncode == 0 and "nothing to run" in r2.stderr, r2.stderr
    assert outs == {n: (project / "runs/smoke/notebooks" / f"{n}.ipynb").stat().st_mtime_ns for n in names}
    r3 = calirl("reproduce", "--profile", "smoke", "--only", "00b", "--force", cwd=project)
    assert r3.returncode == 0 and "[1/1] 00b_cli" in r3.stderr, r3.stderr

def test_failing_notebook_names_cell_and_executed_copy(project):
    _add_nb(project, "99_fail.ipynb", "x = 1", "raise ValueError('broken on purpose')")
    r = calirl("reproduce", "--profile", "smoke", "--only", "99_fail", cwd=project)
    assert r.returncode == 1
    out = project / "runs/smoke/notebooks/99_fail.ipynb"
    assert "notebook 99_fail failed in cell" in r.stderr and "broken on purpose" in r.stderr and str(out) in r.stderr, r.stderr
    assert out.exists() and _state(project)["99_fail"]["status"] == "failed"

def test_interrupted_run_resumes_without_redoing_work(project):
    flag = project / "slow.flag"; flag.touch()
    _add_nb(project, "99_slow.ipynb",
            "import time\nfrom pathlib import Path\nfrom calirl.core import atomic_path\n"
            f"flag = Path({str(flag)!r})\n"
            "with atomic_path(Path(run_dir) / 'artifacts' / 'slow.txt') as t:\n"
            "    t.write_text('half')\n"
            "    (Path(run_dir) / 'started').touch()\n"
            "    while flag.exists(): time.sleep(0.2)\n"
            "    t.write_text('whole')")
    started = project / "runs/smoke/started"
    p = subprocess.Popen([str(BIN / "calirl"), "reproduce", "--profile", "smoke", "--only", "00_core", "99_slow"], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
