"""Every CLI ``--json`` value goes through the JSON guard: too deep or not finite is one ``error:`` line, exit 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from repertory.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["approvals", "approve", "tok", "--json", '{"edited": [1, NaN]}'],
            "error: --json.edited[1]: NaN is not a number JSON allows",
        ),
        (["approvals", "approve", "tok", "--json", "Infinity"], "error: --json: Infinity is not a number JSON allows"),
        (
            ["approvals", "approve", "tok", "--json", "[" * 100_000],
            "error: --json" + "[0]" * 64 + ": nested deeper than 64 levels",
        ),
        (
            ["resume", "tok", '{"a": ' * 300 + "1" + "}" * 300, "--json"],
            "error: VALUE" + ".a" * 64 + ": nested deeper than 64 levels",
        ),
        (
            ["resume", "tok", "[1e400]", "--json"],
            "error: VALUE[0]: 1e400 is too large for a number (it would be Infinity)",
        ),
        (
            ["resume", "tok", "{nope", "--json"],
            "error: VALUE is not valid JSON: Expecting property name enclosed in double quotes at column 2",
        ),
    ],
)
def test_a_refused_json_value_is_one_error_line_and_exit_2(args: list[str], error: str, tmp_path: object) -> None:
    result = runner.invoke(app, [*args, "--store", f"sqlite:///{tmp_path}/none.db"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [error]
    assert "Traceback" not in result.output
