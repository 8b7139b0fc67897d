"""`pip install` is enough: the wheel carries the notebooks and settings.ini, `calirl init` makes a project from
them, and `calirl reproduce` runs in that project with the installed package (no clone anywhere on the path)."""
import json, os, shutil, subprocess, sys, zipfile
from pathlib import Path
from conftest import ROOT

CLI = "import sys; from calirl.cli import main; sys.exit(main())"

def _wheel(tmp_path: Path) -> Path:
    "Build the wheel from a copy of the sources (the checkout gets no build/ folder)."
    src = tmp_path / "src"
    src.mkdir()
    for f in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "settings.ini"): shutil.copy(ROOT / f, src / f)
    shutil.copytree(ROOT / "calirl", src / "calirl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "nbs", src / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    from importlib.metadata import version
    local = int(version("setuptools").split(".")[0]) >= 77             # pyproject.toml needs setuptools >= 77 to build
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "-w", str(tmp_path / "dist"), "--no-deps", "-q",
                        *(["--no-build-isolation"] if local else [])],   # else pip fetches it into an isolated build env
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("calirl-*.whl")
    return whl

def test_wheel_carries_the_project_and_init_makes_one_that_reproduces(tmp_path):
    whl = _wheel(tmp_path)
    names = zipfile.ZipFile(whl).namelist()
    shipped = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("calirl/_project/nbs/"))
    assert shipped == sorted(p.name for p in ROOT.glob("nbs/[0-9]*.ipynb")), shipped
    assert "calirl/_project/settings.ini" in names
    site = tmp_path / "site"                            # the wheel unpacked is the package as pip installs it
    zipfile.ZipFile(whl).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    where = subprocess.run([sys.executable, "-c", "import calirl; print(calirl.__file__)"], env=env, cwd=tmp_path,
                           capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(site)), where           # the installed copy, not the clone
    r = subprocess.run([sys.executable, "-c", CLI, "init", "proj"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "next: cd proj && calirl reproduce" in r.stdout, r.stdout + r.stderr
    proj = tmp_path / "proj"
    assert (proj / "settings.ini").read_bytes() == (ROOT / "settings.ini").read_bytes()
    r = subprocess.run([sys.executable, "-c", CLI, "reproduce", "--profile", "smoke", "--only", "01_theory"], env=env, cwd=proj,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((proj / "runs/smoke/state.json").read_text())
    assert state["01_theory"]["status"] == "ok", state
    assert (proj / "runs/smoke/notebooks/01_theory.ipynb").is_file()
    r = subprocess.run([sys.executable, "-c", CLI, "init", "proj"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nothing was written" in r.stderr, r.stderr

def test_the_old_module_name_still_imports_with_a_warning():
    "`calirl.core` was renamed `calirl.settings`; code written against the old name keeps working for a release, warned."
    import importlib, sys, warnings
    import calirl.settings as new
    sys.modules.pop("calirl.core", None)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        old = importlib.import_module("calirl.core")
    assert any(issubclass(x.category, DeprecationWarning) and "calirl.settings" in str(x.message) for x in w), [str(x.message) for x in w]
    assert old.load_profile is new.load_profile and old.GRPOSettings is new.GRPOSettings
    from calirl.core import load_profile                         # the README's old example still runs
    assert load_profile("tiny").G == new.load_profile("tiny").G
