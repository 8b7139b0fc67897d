"""Ship the project with the package: the wheel carries the numbered notebooks and `settings.ini` under
`calirl/_project/`, so that `pip install calirl` then `calirl init DIR` makes a project `calirl reproduce` runs in.

All metadata lives in `pyproject.toml`; this file only adds that copy step to setuptools' `build_py`.
"""
import re, shutil
from pathlib import Path
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
NOTEBOOK = re.compile(r"^\d\d[a-z]?_\w+\.ipynb$")        # the pipeline's notebooks (calirl.pipeline.NB_PATTERN)


class BuildWithProject(build_py):
    "setuptools' build_py, then copy settings.ini and nbs/NN_*.ipynb into the built package."
    def run(self):
        super().run()
        if self.editable_mode: return                      # an editable install reads the project from the clone
        dest = Path(self.build_lib) / "calirl" / "_project"
        (dest / "nbs").mkdir(parents=True, exist_ok=True)
        shutil.copy2(HERE / "settings.ini", dest / "settings.ini")
        for nb in sorted((HERE / "nbs").iterdir()):
            if NOTEBOOK.match(nb.name): shutil.copy2(nb, dest / "nbs" / nb.name)


setup(cmdclass={"build_py": BuildWithProject})
