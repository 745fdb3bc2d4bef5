"""``notebooks/run_history.ipynb`` runs top to bottom (nbclient): no cell fails, and each section shows its result."""

from __future__ import annotations

import os
import re
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
    assert len(figures) >= 5  # tokens and money, approval waits, failing tools, fork depth, a variant vs the baseline
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "deepest fork chain=2" in text and "forks shared" in text
    # A variant against the baseline: every worker turn ran in a fork, and the hasty variant skipped the SQL.
    ran = re.search(r"(\d+) worker turns: (\d+) ran in forks, 0 failed", text)
    assert ran is not None and int(ran[1]) == int(ran[2]) > 0, text
    assert "ToolTrajectory: recorded 1 vs hasty 0" in text and "ReplyContains: recorded 1 vs hasty 1" in text
