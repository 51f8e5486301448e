"""Sphinx extension of the dlnmomentum docs: text generated from the package at build time.

Directives (MyST: ```` ```{dlnm-help} sweep ````):

``dlnm-help [WORDS]``
    The ``--help`` text of ``dlnm WORDS`` (no words: ``dlnm --help``), from the parser the command line
    itself builds (:func:`dlnmomentum.cli.build_parser`), wrapped at :data:`HELP_WIDTH` columns.
``dlnm-figure-commands NAME``
    The commands that compute figure ``NAME`` (:data:`dlnmomentum.figures.FIGURES`) at each of its sizes,
    each with what the size means (the help of ``dlnm figure --tiny/--quick/--full``), and the one that
    redraws it from its store.
``dlnm-sweep-fields [network]``
    A table of the fields of a sweep point, from the one table that defines them
    (:mod:`dlnmomentum.runs.points`; with ``network``, :data:`dlnmomentum.runs.network.POINT_FIELDS`):
    name, dtype, axes, description.

Checks (warnings, so errors under ``sphinx -W``): every command of ``dlnm`` (sub-commands included) has a
``dlnm-help`` somewhere, and every figure of the registry has its gallery page ``gallery/<name>``.

Docstrings: the package's docstrings write absolute values and norms as plain text (``|u² - v²|``, ``‖θ‖``), which
reStructuredText would read as substitution references; :func:`escape_bars` escapes those bars (outside literals,
roles and math) before autodoc renders a docstring. The source stays as it reads in ``help()``.
"""

import argparse
import os
import re

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

#: Columns of the generated help text (argparse wraps to the terminal width otherwise).
HELP_WIDTH = 100


def _subcommands(parser):
    for action in parser._actions:  # argparse has no public accessor for sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_parsers(parser=None, words=()):
    """``{words: parser}`` for ``dlnm`` and every command under it: ``()``, ``("run",)``, ``("theory", "lam")``..."""
    if parser is None:
        from dlnmomentum.cli import build_parser

        parser = build_parser()
    out = {words: parser}
    for name, sub in _subcommands(parser).items():
        out.update(command_parsers(sub, words + (name,)))
    return out


def help_text(parser, width=HELP_WIDTH):
    """``parser.format_help()`` wrapped at ``width`` columns whatever the terminal."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width + 2)  # argparse: width = COLUMNS - 2
    try:
        return parser.format_help().rstrip() + "\n"
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def _literal(text, language="text"):
    node = nodes.literal_block(text, text)
    node["language"] = language
    return node


def _documented(env):
    if not hasattr(env, "dlnm_cli_documented"):
        env.dlnm_cli_documented = {}
    return env.dlnm_cli_documented


class DlnmHelp(SphinxDirective):
    """``dlnm-help [WORDS]``: the help text of ``dlnm WORDS``."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = False

    def run(self):
        words = tuple(self.arguments[0].split()) if self.arguments else ()
        parsers = command_parsers()
        if words not in parsers:
            known = ", ".join(" ".join(("dlnm",) + w) for w in parsers)
            raise self.error(f"dlnm-help: no command 'dlnm {' '.join(words)}' (commands: {known})")
        _documented(self.env).setdefault(self.env.docname, set()).add(words)
        return [_literal("$ " + " ".join(("dlnm",) + words + ("--help",)) + "\n" + help_text(parsers[words]))]


class DlnmFigureCommands(SphinxDirective):
    """``dlnm-figure-commands NAME``: the commands of figure ``NAME`` at each size, and its redraw."""

    required_arguments = 1
    has_content = False

    def run(self):
        from dlnmomentum.figures import FIGURES

        name = self.arguments[0]
        if name not in FIGURES:
            raise self.error(f"dlnm-figure-commands: no figure {name!r} (figures: {', '.join(FIGURES)})")
        figure_parser = command_parsers()[("figure",)]
        meaning = {a.option_strings[0][2:]: a.help for a in figure_parser._actions
                   if a.option_strings and a.option_strings[0] in ("--tiny", "--quick", "--full")}
        sizes = list(FIGURES[name].SIZES)
        lines = [f"dlnm figure {name} --{size} --out figures" for size in sizes]
        width = max(len(line) for line in lines) + 2
        text = "".join(f"{line:<{width}}# {size}: {meaning.get(size, '')}\n"
                       for line, size in zip(lines, sizes, strict=True))
        text += f"{f'dlnm plot figures/{name}.h5':<{width}}# redraw from the store alone (runs nothing)\n"
        return [_literal(text, "bash")]


def _table(header, rows, widths):
    """A docutils table of text cells (inline literals where a cell is wrapped in backquotes)."""
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    group.extend(nodes.colspec(colwidth=w) for w in widths)

    def row(cells, tag=nodes.entry):
        out = nodes.row()
        for cell in cells:
            para = nodes.paragraph()
            if cell.startswith("`") and cell.endswith("`"):
                para += nodes.literal(cell[1:-1], cell[1:-1])
            else:
                para += nodes.Text(cell)
            entry = tag()
            entry += para
            out += entry
        return out

    head = nodes.thead()
    head += row(header)
    body = nodes.tbody()
    body.extend(row(r) for r in rows)
    group += head
    group += body
    return table


class DlnmSweepFields(SphinxDirective):
    """``dlnm-sweep-fields [network]``: the fields of a sweep point (:mod:`dlnmomentum.runs.points`), or of a
    network sweep point (:data:`dlnmomentum.runs.network.POINT_FIELDS`)."""

    optional_arguments = 1
    has_content = False

    def run(self):
        import numpy as np

        from dlnmomentum.runs import network, points

        if self.arguments and self.arguments[0] != "network":
            raise self.error("dlnm-sweep-fields takes no argument or 'network'")
        if self.arguments:
            tables = ((network.POINT_FIELDS, "dims"),)
        else:
            tables = ((points.PARAMETER_FIELDS, "dims"), (points.SCALAR_FIELDS, "dims"),
                      (points.VECTOR_FIELDS, "dims, coord"))
        rows = []
        for table, shape in tables:
            for name, (dtype, description) in table.items():
                rows.append([f"`{name}`", np.dtype(dtype).name, shape, description])
        return [_table(["field", "dtype", "axes", "what it is"], rows, [18, 8, 10, 64])]


_KEEP = re.compile(r"(``.+?``|:[a-z:]+:`[^`]*`|`[^`]*`_{0,2})")


def escape_bars(lines):
    """Escape ``|`` in docstring ``lines`` (in place) except in literals, roles, math and literal blocks."""
    block_indent = None  # indentation of the line that opened a literal or math block
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if stripped.startswith(".. math::") or stripped.endswith("::"):
            block_indent = indent
            if stripped.startswith(".."):
                continue
        if "|" not in line or stripped.startswith(("|", "+")):  # line blocks and grid tables are real markup
            continue
        parts = _KEEP.split(line)
        lines[i] = "".join(part if k % 2 else part.replace("|", "\\|") for k, part in enumerate(parts))


def _escape_docstring(app, what, name, obj, options, lines):
    escape_bars(lines)


def _purge(app, env, docname):
    _documented(env).pop(docname, None)


def _merge(app, env, docnames, other):
    mine = _documented(env)
    for docname, words in _documented(other).items():
        if docname in docnames:
            mine[docname] = words


def _check(app, env):
    """Every ``dlnm`` command has its help in the docs, every figure its gallery page."""
    documented = set().union(*_documented(env).values()) if _documented(env) else set()
    for words in command_parsers():
        if words not in documented:
            logger.warning("the docs show no help of 'dlnm %s': add ```{dlnm-help} %s``` to docs/guide/cli.md",
                           " ".join(words), " ".join(words))
    from dlnmomentum.figures import FIGURES

    for name in FIGURES:
        if f"gallery/{name}" not in env.found_docs:
            logger.warning("figure %r has no gallery page: add docs/gallery/%s.md", name, name)


def setup(app):
    app.add_directive("dlnm-help", DlnmHelp)
    app.add_directive("dlnm-figure-commands", DlnmFigureCommands)
    app.add_directive("dlnm-sweep-fields", DlnmSweepFields)
    app.connect("autodoc-process-docstring", _escape_docstring, priority=600)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
