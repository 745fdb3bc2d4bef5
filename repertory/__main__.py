"""``python -m repertory``: the ``repertory`` command where its script is not on the PATH (an MCP client's config)."""

from repertory.cli import app

app(prog_name="repertory")
