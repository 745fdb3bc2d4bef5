"""mkdocs hooks: the performance page's figures, rendered from ``benchmarks/results`` at build time.

The figures are never copied into the docs by hand: every build runs the benchmark suite's own
renderer (``benchmarks.harness.render.render_results``, what ``python -m benchmarks`` uses for
``benchmarks/RESULTS.md``) over the stored pyperf suites into a temporary folder, puts its tables
where ``docs/performance/index.md`` holds the marker below, and publishes the plots it drew beside
the page. The renderer's header (the machine and load of whoever renders) is left out: the build
machine is not where the figures were measured; the table's rows and its "Runs" section say that.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

PAGE = "performance/index.md"
MARKER = "<!-- benchmark figures: rendered here at build time by docs/hooks.py -->"
FIRST_KEPT_HEADING = "## Figures"

_rendered: dict[str, str] = {}
_workdir: list[tempfile.TemporaryDirectory[str]] = []


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Put the repository on ``sys.path`` so the benchmark suite's renderer imports from this checkout."""
    root = str(_root(config))
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Render the stored reports; add the plots as files of the site, keep the tables for the page."""
    from benchmarks.harness.render import render_results

    root = _root(config)
    work = tempfile.TemporaryDirectory(prefix="repertory-docs-")
    _workdir.append(work)
    out = Path(work.name)
    page_dir = Path(PAGE).parent
    markdown, plots = render_results(root / "benchmarks" / "results", out / "figures.md", out / "plots")
    text = markdown.read_text()
    start = text.find(FIRST_KEPT_HEADING)
    if start < 0:
        raise PluginError(f"docs/hooks.py: the rendered results have no {FIRST_KEPT_HEADING!r} heading")
    # The page's own title is level 1; the renderer's sections become its level-2 sections and each
    # benchmark's table a level-3 one, so each has a place in the contents.
    _rendered[PAGE] = text[start:]
    for plot in plots:
        files.append(File.generated(config, str(page_dir / "plots" / plot.name), abs_src_path=str(plot)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files, **_: Any) -> str:
    """Put the rendered tables where the performance page holds the marker (which it must hold)."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} lacks the marker the benchmark figures replace: {MARKER}")
    return markdown.replace(MARKER, _rendered[PAGE])


def on_post_build(config: MkDocsConfig) -> None:
    """Remove the temporary rendering once the site is written."""
    while _workdir:
        _workdir.pop().cleanup()
