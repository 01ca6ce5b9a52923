"""What installs the book: the pins, Binder's environment, and lib as a package.

* ``requirements-runtime.txt`` holds what a reader needs (lib's dependencies, the reference
  libraries, JupyterLab); ``requirements.txt`` includes it and adds the build and test stack;
  ``binder/requirements.txt`` includes it alone.
* ``pyproject.toml``'s ranges admit every runtime pin, and never a torch newer than the pin
  (a newer torch is a multi-GB CUDA download where the pinned CPU wheel lies on disk).
* The Colab set-up cell's install path works: lib, built from this tree by pip exactly as the
  cell asks for it, goes into a fresh venv with only its declared dependencies, and a
  chapter runs there top to bottom.
"""
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from lib.widgets.core import WIDGETS_ENV

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import colab_cell  # noqa: E402  (tools/ is not a package)

RUNTIME = ROOT / "requirements-runtime.txt"
# What only builds or tests the book: a reader's environment (Binder) must not carry it.
BUILD_AND_TEST_STACK = {"jupyter-book", "sphinx", "myst-nb", "nbval", "pytest", "hypothesis", "playwright"}


def pins(path: Path) -> dict[str, Version]:
    """Every ``name==version`` of a requirements file, following ``-r`` includes."""
    found = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith(("--extra-index-url", "--index-url")):
            continue
        if line.startswith("-r"):
            found.update(pins((path.parent / line[2:].strip()).resolve()))
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"{path.name}: {line!r} is not an exact pin"
        found[canonicalize_name(requirement.name)] = Version(specifiers[0].version)
    return found


def declared() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    return {group: [Requirement(r) for r in requirements] for group, requirements in groups.items()}


def test_requirements_txt_is_the_runtime_pins_plus_the_build_and_test_stack():
    runtime, everything = pins(RUNTIME), pins(ROOT / "requirements.txt")
    assert runtime.items() <= everything.items()
    assert BUILD_AND_TEST_STACK <= set(everything) - set(runtime)
    assert "jupyterlab" in runtime, "make lab and Binder need JupyterLab"


def test_this_environment_has_the_pinned_versions_jupyterlab_included():
    # `make setup` installs requirements.txt; `make lab` runs the JupyterLab it pins.
    for name, pinned in pins(ROOT / "requirements.txt").items():
        installed = Version(importlib.metadata.version(name))
        assert Version(installed.public) == pinned, f"{name} {installed} is installed; requirements pin {pinned}"


def test_binder_installs_the_runtime_pins_and_not_the_test_stack():
    binder = pins(ROOT / "binder" / "requirements.txt")
    assert binder == pins(RUNTIME)
    assert not BUILD_AND_TEST_STACK & set(binder)


def test_pyproject_admits_every_runtime_pin_and_no_newer_torch():
    runtime = pins(RUNTIME)
    for group, requirements in declared().items():
        for requirement in requirements:
            name = canonicalize_name(requirement.name)
            assert name in runtime, f"pyproject's {group} needs {name}, which requirements-runtime.txt does not pin"
            assert requirement.specifier.contains(runtime[name]), (
                f"pyproject's {group} asks for {requirement}, which excludes the pinned {runtime[name]}"
            )
    (torch,) = [r for r in declared()["dependencies"] if r.name == "torch"]
    pinned = runtime["torch"]
    newer = [Version(f"{pinned.major}.{pinned.minor}.{pinned.micro + 1}"), Version(f"{pinned.major}.{pinned.minor + 1}.0")]
    assert not any(torch.specifier.contains(v) for v in newer), f"{torch} would let pip fetch a newer torch"


def test_the_reference_extra_holds_the_libraries_the_chapters_compare_against():
    names = {canonicalize_name(r.name) for r in declared()["reference"]}
    assert names == {"gensim", "sacrebleu", "rouge-score", "nltk"}


FRESH_VENV_CHAPTER = ROOT / "chapters" / "08_bleu_rouge.ipynb"


@pytest.mark.packaging
def test_a_chapter_runs_from_the_package_alone_in_a_fresh_venv(tmp_path, monkeypatch):
    # The source pip builds lib from: what `pip install <the repository>` would see.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source / "pyproject.toml")
    for package in ("lib", "courseware", "experiments", "benchmarks"):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    # The Colab cell's requirement with this tree as the source; ipykernel is the notebook
    # host's part (Colab has it). The runtime pins constrain versions but add no package.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile",
         colab_cell.requirement(source.as_uri()), "ipykernel", "--constraint", RUNTIME],
        check=True, capture_output=True, text=True,
    )
    subprocess.run([python, "-m", "ipykernel", "install", "--prefix", venv, "--name", "fresh-venv"],
                   check=True, capture_output=True)
    monkeypatch.setenv("JUPYTER_PATH", str(venv / "share" / "jupyter"))
    monkeypatch.setenv(WIDGETS_ENV, "live")

    notebook = nbformat.read(FRESH_VENV_CHAPTER, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("import lib\nprint(lib.__file__)"))
    workdir = tmp_path / "chapters"
    workdir.mkdir()
    NotebookClient(notebook, timeout=300, kernel_name="fresh-venv",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    where = notebook.cells[-1].outputs[0]["text"].strip()
    assert Path(where).is_relative_to(venv), f"the chapter imported lib from {where}, not from the fresh venv"
    assert re.search(r"site-packages/lib/__init__\.py$", where)
