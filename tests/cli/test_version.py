"""One version, in one place: pyproject's ``version``, read from the installed metadata by the package and the CLI."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from typer.testing import CliRunner

import repertory
from repertory.cli import app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_package_version_is_pyprojects_as_installed() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert repertory.__version__ == metadata.version("repertory") == declared


def test_repertory_version_prints_it_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"repertory {repertory.__version__}\n"


def test_version_belongs_to_the_command_line_not_to_its_commands() -> None:
    result = CliRunner().invoke(app, ["sessions", "--version"])
    assert result.exit_code == 2
    assert "No such option: --version" in result.output
