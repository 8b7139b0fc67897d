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

@pytest.fixture(scope="session")
def smoke_reproduction(tmp_path_factory):
    "One real `calirl reproduce --profile smoke` of the whole pipeline, shared by the tests that inspect it."
    proj = copy_project(tmp_path_factory.mktemp("repro") / "proj")
    return proj, calirl("reproduce", "--profile", "smoke", cwd=proj, timeout=900)
