"""One manifest of the stages (`calirl.stages`): every notebook of the pipeline has exactly one row and every artifact
exactly one maker; the plan, the artifact registry and the notebook map read it; it sits at the bottom of the import
graph, and the pipeline no longer imports the tasks."""
import ast, subprocess, sys
import pytest
from conftest import ROOT
from calirl.artifacts import ARTIFACTS, MissingArtifactError, require_artifact
from calirl.pipeline import list_notebooks
from calirl.stages import MAKERS, STAGES, Stage, makers, stage_table

NAMES = [p.stem for p in list_notebooks(ROOT)]

def test_every_notebook_of_the_pipeline_has_exactly_one_row():
    assert list(STAGES) == NAMES, f"rows without a notebook: {set(STAGES) - set(NAMES)}; notebooks without a row: {set(NAMES) - set(STAGES)}"
    assert all(k == s.name for k, s in STAGES.items())
    with pytest.raises(ValueError, match="has two rows"): stage_table([Stage("01_a"), Stage("01_a")])

def test_every_artifact_has_exactly_one_maker():
    made = [a for s in STAGES.values() for a in s.makes]
    assert len(made) == len(set(made)) == len(MAKERS) == len(ARTIFACTS) and set(MAKERS) == set(ARTIFACTS)
    assert all(a in STAGES[MAKERS[a]].makes for a in ARTIFACTS)
    with pytest.raises(ValueError, match="made by both"):
        makers({"01_a": Stage("01_a", makes={"x": "x.json"}), "02_b": Stage("02_b", makes={"x": "x.json"})})

def test_needs_point_only_to_earlier_notebooks():
    for s in STAGES.values():
        assert s.needs == ("*",) or all(n in NAMES[:NAMES.index(s.name)] for n in s.needs), (s.name, s.needs)

@pytest.mark.parametrize("artifact", list(ARTIFACTS))
def test_a_missing_artifact_names_its_maker(artifact, tmp_path):
    with pytest.raises(MissingArtifactError, match=f"made by notebook {MAKERS[artifact]} — run `calirl reproduce --only {MAKERS[artifact]}`"):
        require_artifact(tmp_path, artifact)

def _calirl_imports(module:str) -> set[str]:
    "The calirl modules that `calirl/<module>.py` imports anywhere in its text (lazy imports included)."
    out = set()
    for n in ast.walk(ast.parse((ROOT / "calirl" / f"{module}.py").read_text())):
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module: out.add(n.module.split(".")[0])
        elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith("calirl."): out.add(n.module.split(".")[1])
        elif isinstance(n, ast.Import): out |= {a.name.split(".")[1] for a in n.names if a.name.startswith("calirl.")}
    return out - {module}

def test_stages_sit_low_and_the_import_graph_has_no_circle():
    assert _calirl_imports("stages") == set(), "calirl.stages imports nothing from calirl"
    assert "tasks" not in _calirl_imports("pipeline"), "calirl.pipeline reads world refusals from calirl.stages, not calirl.tasks"
    graph = {p.stem: _calirl_imports(p.stem) for p in (ROOT / "calirl").glob("*.py") if not p.stem.startswith("_")}
    def reach(u, seen):
        for v in graph.get(u, ()):
            if v not in seen:
                seen.add(v)
                reach(v, seen)
        return seen
    circles = [u for u in graph if u in reach(u, set())]
    assert not circles, f"modules that import themselves through others: {circles}"

def test_the_plan_imports_neither_the_tasks_nor_anything_heavy():
    code = ("import sys, calirl.pipeline, calirl.stages\n"
            "bad = [m for m in ('calirl.tasks', 'torch', 'transformers', 'pandas', 'numpy') if m in sys.modules]\n"
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

def test_docs_notebook_map_is_the_rendering_of_the_stages():
    from calirl.docs import notebook_map
    page = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")
    assert page == notebook_map(), ("docs/notebooks.md is not the rendering of calirl.stages.STAGES; write it with `python -c \"import pathlib, "
                                    "calirl.docs as d; pathlib.Path('docs/notebooks.md').write_text(d.notebook_map(), encoding='utf-8')\"`")
