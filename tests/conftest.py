"""Shared fixtures: every test works on a throwaway copy of the project, never on the checkout itself."""
import os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(v, "1")   # as `calirl reproduce` does on CPU
os.environ.setdefault("MPLCONFIGDIR", str(ROOT / "runs" / ".cache" / "matplotlib"))
os.environ.setdefault("HF_HOME", str(ROOT / "runs" / ".cache" / "huggingface"))
BIN = Path(sys.executable).parent
os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"

def copy_project(dst: Path) -> Path:
    "Copy what a run needs (notebooks, profiles, nbdev config) into `dst`."
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "nbs", dst / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for f in ("settings.ini", "pyproject.toml"): shutil.copy(ROOT / f, dst / f)
    return dst

def calirl(*args, cwd, timeout=600, **kw) -> subprocess.CompletedProcess:
    "Run the installed `calirl` console script."
    return subprocess.run([str(BIN / "calirl"), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)

@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(tmp_path / "proj")

@pytest.fixture(scope="session")
def nb_project(tmp_path_factory) -> Path:
    "One copy shared by the notebook tests, which hand artifacts to each other in run order."
    return copy_project(tmp_path_factory.mktemp("nbtest") / "proj")

_SMOKE = {}   # the background smoke reproduction: project, process, log files

def pytest_collection_modifyitems(session, config, items):
    "Start the smoke reproduction as soon as a collected test needs it and run the tests that read it last, so that it runs beside all the others."
    needs = lambda it: "smoke_reproduction" in getattr(it, "fixturenames", ())
    items[:] = [it for it in items if not needs(it)] + [it for it in items if needs(it)]   # stable: each group keeps its order
    if _SMOKE or not any(map(needs, items)): return
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="calirl-smoke-"))
    proj = copy_project(root / "proj")
    out, err = open(root / "stdout.txt", "w+"), open(root / "stderr.txt", "w+")
    proc = subprocess.Popen([str(BIN / "calirl"), "reproduce", "--profile", "smoke"], cwd=proj, stdout=out, stderr=err, text=True)
    _SMOKE.update(root=root, proj=proj, proc=proc, out=out, err=err)

def pytest_sessionfinish(session, exitstatus):
    "Stop a smoke reproduction no test waited for, and remove its folder."
    if not _SMOKE: return
    if _SMOKE["proc"].poll() is None:
        _SMOKE["proc"].kill()
        _SMOKE["proc"].wait()
    _SMOKE["out"].close()
    _SMOKE["err"].close()
    shutil.rmtree(_SMOKE["root"], ignore_errors=True)

@pytest.fixture(scope="session")
def smoke_reproduction():
    "One real `calirl reproduce --profile smoke` of the whole pipeline, started in the background at collection and shared by the tests that inspect it."
    proc = _SMOKE["proc"]
    try: proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("calirl reproduce --profile smoke took over 900 s")
    read = lambda f: (f.seek(0), f.read())[1]
    return _SMOKE["proj"], subprocess.CompletedProcess(proc.args, proc.returncode, read(_SMOKE["out"]), read(_SMOKE["err"]))
