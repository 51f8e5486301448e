"""The README's Python examples run as written: every ```python block, in order, in one namespace, in a fresh
folder (they write stores there). A block that fails names itself; the docs' own examples run in test_docs.py."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_the_readme_has_python_examples():
    assert len(_blocks()) >= 6


@pytest.mark.slow
def test_every_readme_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "readme"}
    for k, block in enumerate(_blocks()):
        code = compile(block, f"README.md python block {k + 1}", "exec")
        exec(code, namespace)  # noqa: S102 - the README's own examples
    assert (tmp_path / "run.h5").exists() and (tmp_path / "grid.h5").exists()
    assert namespace["lim"].config.scheme == "rodas" and namespace["lim"].status_name == "converged"
