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

_BG = {}   # fixture name -> the background reproduction it waits for: project, process, log files
# The notebooks whose float checks depend on the tiny model's size: the suite runs them at the main job's sizes
# (`[tiny]`), once with this machine's own kernels and once with MKL and ATen pinned to their most generic code paths,
# which stands in for a CPU whose SIMD kernels add in another order (an AVX2 machine and an AVX-512 one differ so).
TINY_SIZE_NOTEBOOKS = ["04_models", "04a_backends"]
GENERIC_KERNELS = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}
BACKGROUND = {   # fixture -> (profile, extra `calirl reproduce` arguments, folder prefix[, environment])
    "smoke_reproduction": ("smoke", [], "calirl-smoke-"),
    "tiny_sizes_native": ("tiny", ["--only", *TINY_SIZE_NOTEBOOKS], "calirl-tiny-native-"),
    "tiny_sizes_generic_kernels": ("tiny", ["--only", *TINY_SIZE_NOTEBOOKS], "calirl-tiny-generic-", GENERIC_KERNELS),
    # the paper's code path on stand-ins: the notebooks that make or read its models, data and endpoint (the library
    # notebooks run the same code in smoke); its endpoint on a free port, so that nothing else can answer in its place
    "paper_mini_reproduction": ("paper-mini", ["--only", "04_models", "04c", "05_rollout", "06", "07", "08", "09_grpo", "09a", "09b", "10", "11", "14"],
                                "calirl-paper-mini-"),
}

from calirl.training import free_port  # noqa: E402  (a TCP port on 127.0.0.1 that nothing listens on now)

# The documentation site (`calirl.docs.build_docs` of the checkout, as `tests/test_docs.py` reads it), built in a process of
# its own from collection on like the reproductions: mkdocs' conversion of the notebooks is about a minute of one core.
DOCS_BUILD = ("import json, sys\nfrom calirl.docs import build_docs\ngot = build_docs(sys.argv[1], sys.argv[2])\n"
              "print(json.dumps({k: v if isinstance(v, (int, float)) else str(v) for k, v in got.items()}))")

# The order in which the tests that read a background run go, at the end: the runs that end first first, so that the
# readers of an ended run work beside the runs still going (the tiny-size runs take two notebooks; paper-mini, one
# notebook at a time, each starting its own server, ends last).
READ_ORDER = ["tiny_sizes_native", "tiny_sizes_generic_kernels", "smoke_reproduction", "paper_mini_reproduction"]

def pytest_collection_modifyitems(session, config, items):
    "Start each background reproduction a collected test needs and run the tests that read one last, so that they run beside all the others."
    last = lambda it: max((READ_ORDER.index(f) + 1 for f in getattr(it, "fixturenames", ()) if f in BACKGROUND), default=0)
    items[:] = sorted(items, key=last)                                   # stable: each group keeps its order
    import tempfile
    if "docs_site" not in _BG and any("docs_site" in getattr(it, "fixturenames", ()) for it in items):
        root = Path(tempfile.mkdtemp(prefix="calirl-docs-"))
        out, err = open(root / "stdout.txt", "w+"), open(root / "stderr.txt", "w+")
        proc = subprocess.Popen([sys.executable, "-c", DOCS_BUILD, str(ROOT), str(root / "out")], cwd=root, stdout=out, stderr=err, text=True)
        _BG["docs_site"] = dict(root=root, proj=root / "out", proc=proc, out=out, err=err)
    for fixture, (prof, extra, prefix, *env) in BACKGROUND.items():
        if fixture in _BG or not any(fixture in getattr(it, "fixturenames", ()) for it in items): continue
        root = Path(tempfile.mkdtemp(prefix=prefix))
        proj = copy_project(root / "proj")
        (root / "tmp").mkdir()                                           # its own temporary folder: what a run leaves there, a test sees
        if prof == "paper-mini": extra = extra + ["-p", f"openai_base_url=http://127.0.0.1:{free_port()}/v1"]
        out, err = open(root / "stdout.txt", "w+"), open(root / "stderr.txt", "w+")
        proc = subprocess.Popen([str(BIN / "calirl"), "reproduce", "--profile", prof, *extra], cwd=proj, stdout=out, stderr=err, text=True,
                                env={**os.environ, **(env[0] if env else {}), "TMPDIR": str(root / "tmp")})
        _BG[fixture] = dict(root=root, proj=proj, proc=proc, out=out, err=err)

def pytest_sessionfinish(session, exitstatus):
    "Stop the background reproductions no test waited for, and remove their folders."
    for bg in _BG.values():
        if bg["proc"].poll() is None:
            bg["proc"].kill()
            bg["proc"].wait()
        bg["out"].close()
        bg["err"].close()
        shutil.rmtree(bg["root"], ignore_errors=True)

def _wait(fixture:str, timeout:int=900):
    "The project and finished process of background reproduction `fixture`."
    bg = _BG[fixture]
    try: bg["proc"].wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        bg["proc"].kill()
        pytest.fail(f"{' '.join(bg['proc'].args[1:])} took over {timeout} s")
    read = lambda f: (f.seek(0), f.read())[1]
    err = read(bg["err"])
    logs = sorted(Path(bg["proj"]).glob("runs/*/logs/serve-*.log"), key=lambda p: p.stat().st_mtime)
    if bg["proc"].returncode != 0 and logs:                # the last server's log goes with the run's folder at the session's end
        err += f"\n--- the end of {logs[-1].name}:\n{logs[-1].read_text(errors='replace')[-1000:]}"
    return bg["proj"], subprocess.CompletedProcess(bg["proc"].args, bg["proc"].returncode, read(bg["out"]), err)

@pytest.fixture(scope="session")
def docs_site():
    "The built site's folder and `build_docs`'s summary (its Paths as strings), from the build started at collection."
    import json
    out, r = _wait("docs_site", timeout=600)
    if r.returncode != 0: pytest.fail(f"build_docs failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    return out / "site", json.loads(r.stdout.strip().splitlines()[-1])

@pytest.fixture(scope="session")
def smoke_reproduction():
    "One real `calirl reproduce --profile smoke` of the whole pipeline, started in the background at collection and shared by the tests that inspect it."
    return _wait("smoke_reproduction")

@pytest.fixture(scope="session")
def tiny_sizes_native():
    "`calirl reproduce --profile tiny` of the notebooks whose float checks depend on the model's size, with this machine's kernels."
    return _wait("tiny_sizes_native")

@pytest.fixture(scope="session")
def tiny_sizes_generic_kernels():
    "The same notebooks at the tiny sizes with MKL and ATen pinned to their generic kernels: another CPU's rounding."
    return _wait("tiny_sizes_generic_kernels")

@pytest.fixture(scope="session")
def paper_mini_reproduction():
    "One real `calirl reproduce --profile paper-mini` from 04_models on: the paper's code path on stand-in models, in the background."
    return _wait("paper_mini_reproduction")
