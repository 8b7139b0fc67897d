"""The package is exactly what the notebooks export, and the notebooks are nbdev-clean."""
import filecmp, shutil, subprocess, sys
from pathlib import Path
from conftest import ROOT

def _nbdev(cmd: str, cwd: Path):
    code = f"from nbdev.{cmd}; {cmd.split(' import ')[1]}()"
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]

def _tree(d: Path) -> dict:
    return {p.relative_to(d): p for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts}

def test_package_matches_notebooks(tmp_path):
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "calirl").mkdir(); shutil.copy(ROOT / "calirl" / "__init__.py", tmp_path / "calirl")
    _nbdev("doclinks import nbdev_export", tmp_path)
    want, have = _tree(tmp_path / "calirl"), _tree(ROOT / "calirl")
    assert set(want) == set(have), f"modules differ: only exported {set(want) - set(have)}, only in repo {set(have) - set(want)}; run nbdev-export"
    stale = [str(k) for k in want if not filecmp.cmp(want[k], have[k], shallow=False)]
    assert not stale, f"calirl/ is out of sync with nbs/ in {stale}; run nbdev-export"

def test_notebooks_are_clean(tmp_path):
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    _nbdev("clean import nbdev_clean", tmp_path)
    dirty = [p.name for p in (ROOT / "nbs").glob("*.ipynb")
             if p.read_bytes() != (tmp_path / "nbs" / p.name).read_bytes()]
    assert not dirty, f"not nbdev-clean: {dirty}; run nbdev-clean"

def test_every_notebook_has_one_parameters_cell_naming_the_smoke_profile():
    "Each parameters cell names the profile and its overrides (and, where used, the run's folders), with [smoke]'s defaults; nothing else."
    from calirl.pipeline import declared_parameters, list_notebooks
    runner = dict(profile="smoke", overrides={}, run_dir="../runs/smoke", figures_dir="../figures/smoke")
    for nb in list_notebooks(ROOT):
        decl = declared_parameters(nb)
        assert {"profile", "overrides"} <= set(decl), f"{nb.name}: the parameters cell must name `profile` and `overrides`"
        for k, v in decl.items():
            assert k in runner and v == runner[k], f"{nb.name}: {k} = {v!r}; a parameters cell holds only {runner}"

def test_exported_modules_have_no_undefined_names():
    "A notebook can hide a missing import (an unexported cell imported it); the module then breaks on import or use."
    from pyflakes.api import checkPath
    from pyflakes.reporter import Reporter
    import io
    out = io.StringIO()
    for p in sorted((ROOT / "calirl").glob("*.py")): checkPath(str(p), Reporter(out, out))
    bad = [l for l in out.getvalue().splitlines() if "undefined name" in l]
    assert not bad, "\n".join(bad)

def test_figures_hold_results_not_code():
    "`figures/` holds what runs wrote: no scripts or notebooks (a check that matters is a notebook cell or a `calirl` command), and a README in every top-level folder."
    figs = ROOT / "figures"
    code = [str(p.relative_to(ROOT)) for p in figs.rglob("*") if p.suffix in (".py", ".sh", ".ipynb") and "smoke" not in p.relative_to(figs).parts[:1]]
    assert not code, f"code in figures/: {code}; make it a notebook cell or a `calirl` command, or leave it to git history"
    missing = [d.name for d in figs.iterdir() if d.is_dir() and d.name not in ("smoke", "paper-smoke", "paper-mini") and not (d / "README.md").is_file()]
    assert not missing, f"figures/ folders without a README.md saying what made them: {missing}"
    from calirl.settings import read_profiles
    written = set(read_profiles(ROOT / "settings.ini"))                    # a run writes figures/<profile>/ and nothing else
    records = [d.name for d in figs.iterdir() if d.is_dir() and d.name not in written]
    assert not records, f"figures/ holds folders no profile's run writes: {records}; records of checks belong in lab/"

def _commit_hashes(text:str) -> list[str]:
    "What looks like an abbreviated or full git commit hash in `text`: 7 to 40 hex digits with both a digit and a letter."
    import re
    return [m for m in re.findall(r"(?<![0-9A-Za-z_/.#-])[0-9a-f]{7,40}(?![0-9A-Za-z_])", text) if re.search(r"[a-f]", m) and re.search(r"[0-9]", m)]

def test_guides_and_notebook_prose_carry_no_run_history():
    """`docs/` and the notebooks' markdown say what the code does and why; run history — which commit measured what —
    lives in `lab/` (and git history). A commit hash in them is the mark of a log."""
    import json
    assert _commit_hashes("measured at `1d78b45` and 9ce0860: two") == ["1d78b45", "9ce0860"] and _commit_hashes("#ff00aa 1234567 deadbee") == []
    found = [f"docs/{p.name}: {h}" for p in sorted((ROOT / "docs").glob("*.md")) for h in _commit_hashes(p.read_text(encoding="utf-8"))]
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        md = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown")
        found += [f"nbs/{nb.name}: {h}" for h in _commit_hashes(md)]
    assert not found, "run history outside lab/ (move it to lab/, keep the guide):\n" + "\n".join(found)

def test_every_float_comparison_states_why_its_tolerance_holds():
    """A file that compares floats says why its tolerances are what they are (a `tolerances:` line), and no model output
    (logits, log-probabilities) is held to a constant: those go through `assert_order_close`, whose bound follows from
    the arithmetic, or are compared exactly. A constant tuned on one CPU is what stopped the main job on another."""
    import json, re
    compares = re.compile(r"\b(test_close|allclose|assert_close|approx|isclose|assert_order_close)\(")
    constant_on_model = re.compile(r"\btest_close\(.*(logits|logprobs)")
    silent, constant = [], []
    for f in sorted((ROOT / "nbs").glob("*.ipynb")) + sorted((ROOT / "tests").glob("test_*.py")):
        if f.suffix == ".py": cells = [f.read_text()]
        else: cells = ["".join(c["source"]) for c in json.loads(f.read_text())["cells"] if c["cell_type"] == "code"]
        text = "\n".join(cells)
        if compares.search(text) and "tolerances:" not in text: silent.append(f.name)
        constant += [f"{f.name}: {l.strip()[:100]}" for c in cells if "#| gpu" not in c for l in c.splitlines() if constant_on_model.search(l)]
    assert not silent, f"compare floats without a `tolerances:` line saying why: {silent}"
    assert not constant, "model outputs held to a constant tolerance:\n" + "\n".join(constant)

def _private_imports(src:str, own:str, where:str) -> list[str]:
    "Each `from calirl.X import _name` (or `from .X import _name`) in `src` whose X is not `own`, as `where: from calirl.X import _name`."
    import ast
    tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.ImportFrom) or not n.module: continue
        mod = n.module if n.level == 0 else f"calirl.{n.module}" if n.level == 1 else ""
        if not mod.startswith("calirl.") or mod == f"calirl.{own}": continue
        out += [f"{where}: from {mod} import {a.name}" for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
    return out

def test_private_names_stay_in_their_module():
    "No module (nor its notebook) imports another calirl module's private `_name`: what two modules share is public, or lives where both import it."
    import json, re
    found = []
    for p in sorted((ROOT / "calirl").glob("*.py")): found += _private_imports(p.read_text(), p.stem, p.name)
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
        own = next((m.group(1) for c in cells for m in [re.search(r"^#\| default_exp (\S+)", c, re.M)] if m), "")
        found += [f for c in cells for f in _private_imports(c, own, nb.name)]
    assert not found, "private names imported from another module (make them public, or move them where both can import them):\n" + "\n".join(sorted(found))

def test_the_check_finds_a_private_import():
    src = "from calirl.settings import _suggest, typed_value\nfrom .training import _rank_device\nfrom .dial import _replies\nfrom calirl.x import __version__\nfrom os import _exit"
    assert _private_imports(src, "dial", "m.py") == ["m.py: from calirl.settings import _suggest", "m.py: from calirl.training import _rank_device"]

def _n_workers_without_device(src:str, where:str) -> list[str]:
    "Each call of `n_workers` in `src` given fewer than two arguments, i.e. no device: on a GPU node it would count CPU cores."
    import ast
    tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
    name = lambda f: getattr(f, "id", None) or getattr(f, "attr", None)
    return [f"{where}:{c.lineno}: {ast.unparse(c)}" for c in ast.walk(tree)
            if isinstance(c, ast.Call) and name(c.func) == "n_workers" and len(c.args) + len(c.keywords) < 2]

def test_every_n_workers_call_names_its_device():
    "Worker counts depend on where models run (one per CPU core on the CPU, one on a GPU): no call of `n_workers`, in the package or a notebook, leaves the device out."
    import json
    found = []
    for p in sorted((ROOT / "calirl").glob("*.py")): found += _n_workers_without_device(p.read_text(), p.name)
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for c in json.loads(nb.read_text())["cells"]:
            if c["cell_type"] == "code": found += _n_workers_without_device("".join(c["source"]), nb.name)
    assert not found, "n_workers called without a device (pass the profile's `device`):\n" + "\n".join(found)

def test_the_check_finds_an_n_workers_call_without_a_device():
    src = "n_workers(prof.workers)\nn_workers(0, 'cuda')\nruntime.n_workers(w, device=d)\nruntime.n_workers(w)"
    assert _n_workers_without_device(src, "t") == ["t:1: n_workers(prof.workers)", "t:4: runtime.n_workers(w)"]

CELL_LINES = 40   # the longest a code cell may be: one idea, readable without scrolling

def long_cells(nb_path:Path, limit:int=CELL_LINES) -> list[tuple[int, int, str]]:
    "(cell index, lines, first line) of each code cell of notebook `nb_path` longer than `limit` lines."
    import json
    cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
    src = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    return [(i, len(src(c).splitlines()), src(c).splitlines()[0]) for i, c in enumerate(cells)
            if c["cell_type"] == "code" and len(src(c).splitlines()) > limit]

def test_no_code_cell_is_over_forty_lines():
    found = {p.name: long_cells(p) for p in sorted((ROOT / "nbs").glob("*.ipynb"))}
    assert not any(found.values()), {k: v for k, v in found.items() if v}

def test_the_check_finds_a_long_cell(tmp_path):
    import json
    cells = [{"cell_type": "code", "source": "\n".join(f"x{i} = {i}" for i in range(CELL_LINES + 1)), "metadata": {}},
             {"cell_type": "code", "source": ["y = 1\n", "z = 2"], "metadata": {}}]
    (tmp_path / "a.ipynb").write_text(json.dumps({"cells": cells}))
    assert long_cells(tmp_path / "a.ipynb") == [(0, CELL_LINES + 1, "x0 = 0")]
