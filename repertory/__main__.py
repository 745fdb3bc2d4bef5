"""``python -m repertory``: the ``repertory`` command where its script is not on the PATH (an MCP client's config)."""

from repertory.cli import app

if __name__ == "__main__":  # importing the module (the wheel check walks every module) must not run the CLI
    app(prog_name="repertory")
