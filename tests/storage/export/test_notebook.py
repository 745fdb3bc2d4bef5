"""``notebooks/run_history.ipynb`` runs top to bottom (nbclient); a failing cell fails the test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "run_history.ipynb"


def test_run_history_notebook_executes(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]  # nbformat has no annotations
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    # The kernel is this interpreter; its temporary files (the fleet's store, the export) go under tmp_path.
    env = {**os.environ, "TMPDIR": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    client.execute(env=env)  # raises CellExecutionError, naming the cell, if any cell fails
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(figures) >= 4  # tokens and money, approval waits, failing tools, fork depth
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "deepest fork chain=2" in text and "forks shared" in text
