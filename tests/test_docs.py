"""The documentation stays true to the code.

* Every ```` ```python ```` block of the guide pages (``docs/*.md``, ``docs/guide/*.md``) runs: each page's blocks in
  order, in one namespace, in a temporary folder (a block that fails names its page and line). Examples that cannot
  run here (a cluster's shell commands, ...) are ```` ```bash ```` blocks; the pages listed in :data:`NOT_EXECUTED`
  are reference texts whose snippets read files that only exist after a run.
* Every public name has a page in the API reference, every result field a line on the science page, every ``dlnm``
  command its help on the CLI page and every figure its gallery page and image (the docs build checks the last two
  as well, as warnings that ``sphinx -W`` turns into errors).

The site itself is built by ``.ci/run`` (``python -m sphinx -W -b html docs docs/_build/html``).
"""

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

import dlnmomentum as dm
from dlnmomentum import theory

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Pages of ``docs/`` whose code is not run, and why.
NOT_EXECUTED = {
    "architecture.md": "no examples",
    "findings.md": "commands that take minutes to hours (dlnm reproduce)",
    "reliability.md": "no examples",
    "store-format.md": "reads a run.h5 that the reader is assumed to have; the same calls run in guide/stores.md",
}

FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(path):
    """``[(line, code), ...]``: the ```` ```python ```` blocks of a Markdown page, with the line each starts on."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in FENCE.finditer(text)]


def guide_pages():
    pages = sorted(DOCS.glob("*.md")) + sorted((DOCS / "guide").glob("*.md"))
    return [p for p in pages if p.name not in NOT_EXECUTED or p.parent != DOCS]


EXAMPLE_PAGES = [p for p in guide_pages() if python_blocks(p)]


def test_the_guide_has_examples():
    names = {p.relative_to(DOCS).as_posix() for p in EXAMPLE_PAGES}
    assert {"guide/runs.md", "guide/flows.md", "guide/stores.md", "guide/sweeps.md", "guide/networks.md",
            "guide/dask-gpu.md"} <= names


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": f"docs_example_{page.stem.replace('-', '_')}"}
    for line, code in python_blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        try:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the examples are the test
        except Exception as exc:
            raise AssertionError(f"the example at {where} failed: {type(exc).__name__}: {exc}") from exc


def _documented_api_names():
    text = "\n".join(p.read_text(encoding="utf-8") for p in (DOCS / "api").glob("*.md"))
    names = set()
    module = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(".. currentmodule::"):
            module = stripped.split("::", 1)[1].strip()
        elif re.fullmatch(r"[A-Za-z_][\w.]*", stripped) and module:
            names.add(f"{module}.{stripped}")
        elif stripped.startswith((".. autodata::", ".. autofunction::", ".. autoclass::")):
            names.add(stripped.split("::", 1)[1].strip())
    return names


#: Top-level names documented as members of another page (the Status constants) rather than on their own.
STATUS_CONSTANTS = {"CONVERGED", "DIVERGED", "INTERRUPTED", "MAX_STEPS", "RUNNING", "STALLED", "STATUS_MESSAGES"}


def test_every_public_name_has_an_api_page():
    documented = _documented_api_names()
    wanted = {f"dlnmomentum.{n}" for n in dm.__all__ if n not in STATUS_CONSTANTS and n != "theory"}
    wanted |= {f"dlnmomentum.theory.{n}" for n in theory.__all__}
    missing = sorted(wanted - documented)
    assert not missing, f"public names without an API page (add them to docs/api/index.md): {missing}"
    api_text = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    for name in STATUS_CONSTANTS:
        assert f"dm.{name}" in api_text


@pytest.mark.parametrize("cls", [dm.MGDResult, dm.FlowResult, dm.NetworkResult], ids=lambda c: c.__name__)
def test_every_result_field_is_on_the_science_page(cls):
    text = (DOCS / "science.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(cls) if f"`{f.name}`" not in text]
    assert not missing, f"{cls.__name__} fields not described in docs/science.md: {missing}"


def _docs_extension():
    spec = importlib.util.spec_from_file_location("dlnm_docs", DOCS / "_ext" / "dlnm_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_command_has_its_help_on_the_cli_page():
    pytest.importorskip("docutils")
    pytest.importorskip("sphinx")  # the docs extra: the extension imports both
    ext = _docs_extension()
    text = (DOCS / "guide" / "cli.md").read_text(encoding="utf-8")
    shown = {tuple(m.group(1).split()) for m in re.finditer(r"^```\{dlnm-help\}[ \t]*(.*)$", text, re.MULTILINE)}
    missing = [" ".join(("dlnm",) + words) for words in ext.command_parsers() if words not in shown]
    assert not missing, f"commands without their help in docs/guide/cli.md: {missing}"


def test_every_figure_has_a_gallery_page_and_image():
    from dlnmomentum.figures import FIGURES

    for name in FIGURES:
        page = DOCS / "gallery" / f"{name}.md"
        assert page.exists(), f"no gallery page for figure {name}"
        text = page.read_text(encoding="utf-8")
        assert f"_static/gallery/{name}.png" in text and f"{{dlnm-figure-commands}} {name}" in text
        assert (DOCS / "_static" / "gallery" / f"{name}.png").exists(), f"no image for figure {name}"


def test_the_citation_file_names_this_version():
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(r'^version: "([^"]+)"$', text, re.MULTILINE).group(1) == dm.__version__


#: ``dlnmomentum.a.b`` (not the ``module:Class`` paths of 0.2.0 files that the registry maps, nor file names)
DOTTED = re.compile(r"\bdlnmomentum(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?![A-Za-z0-9_:])")


def _resolves(dotted):
    """Whether ``dlnmomentum.a.b.c`` names a module or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module)
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_name_in_the_docs_and_messages_exists():
    """A message or a page that sends the reader to ``dlnmomentum.x.y`` names something that is there (one sent
    users to ``dlnmomentum.flow.max_stable_step`` after the module had moved)."""
    sources = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("*/*.md"), *(ROOT / "dlnmomentum").rglob("*.py")]
    missing = set()
    for path in sources:
        for name in DOTTED.findall(path.read_text(encoding="utf-8")):
            if not name.endswith((".py", ".h5", ".md")) and not _resolves(name):
                missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, sorted(missing)
