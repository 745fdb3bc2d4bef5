"""``repertory eval build|run|report`` through typer's runner, on the stored world's SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from repertory import Runtime
from repertory.cli import app
from repertory.evals import load_dataset

from .world import build_world, count_lines, make_agents

runner = CliRunner()


def _cells(output: str) -> list[str]:
    """Each line of a printed table with its borders gone and its cells one space apart."""
    return [" ".join(line.replace("│", " ").split()) for line in output.splitlines()]


AGENTS = "tests.evals.world:world_agents"


async def _world(folder: Path) -> None:
    async with await Runtime.start(store=f"sqlite:///{folder / 'world.db'}", agents=make_agents(folder)) as rt:
        await build_world(rt)


def test_build_run_and_report(tmp_path: Path) -> None:
    asyncio.run(_world(tmp_path))
    url = f"sqlite:///{tmp_path / 'world.db'}"
    env = {"REPERTORY_TEST_WORLD": str(tmp_path)}
    dataset, out = tmp_path / "shop.yaml", tmp_path / "analytics"

    built = runner.invoke(
        app, ["eval", "build", str(dataset), "--store", url, "--agent", "ops", "--agents", AGENTS], env=env
    )
    assert built.exit_code == 0, built.output
    assert f"4 cases -> {dataset}" in " ".join(built.output.split())
    loaded = load_dataset(dataset)
    assert loaded.name == "shop" and [c.expected_output.tool_calls[0].idempotent for c in loaded.cases[:1]] == [True]  # type: ignore[union-attr]

    ledger = count_lines(tmp_path / "ledger.log")
    for name, model in (("same", "tests.evals.world:ops_model"), ("careless", "tests.evals.world:careless_model")):
        argv = ["eval", "run", str(dataset), "--name", name, "--store", url, "--agents", AGENTS, "--out", str(out)]
        ran = runner.invoke(app, [*argv, "--model", model, "--concurrency", "2"], env=env)
        assert ran.exit_code == 0, ran.output
        assert f"Evaluation Summary: {name}" in ran.output and "failed to run" not in ran.output
    assert count_lines(tmp_path / "ledger.log") == ledger

    summary = runner.invoke(app, ["eval", "report", "--out", str(out)])
    assert summary.exit_code == 0, summary.output
    lines = _cells(summary.output)
    assert any("same ToolTrajectory assertion 4 1" in line for line in lines), summary.output
    assert any("careless ToolTrajectory assertion 4 0.75" in line for line in lines), summary.output

    side = runner.invoke(app, ["eval", "report", "--out", str(out), "--eval", "same", "--against", "careless"])
    assert side.exit_code == 0, side.output
    booking = loaded.cases[0].name
    rows = [line for line in _cells(side.output) if booking is not None and booking in line]
    assert any("ToolTrajectory 1 0 -1" in row for row in rows), side.output


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    asyncio.run(_world(tmp_path))
    url = f"sqlite:///{tmp_path / 'world.db'}"
    env = {"REPERTORY_TEST_WORLD": str(tmp_path)}
    cases = [
        ["eval", "build", str(tmp_path / "shop.txt"), "--store", url],
        ["eval", "build", str(tmp_path / "shop.yaml"), "--store", url, "--sql", "SELECT 1"],
        ["eval", "build", str(tmp_path / "shop.yaml"), "--store", url, "--after", "yesterday"],
        ["eval", "build", str(tmp_path / "shop.yaml"), "--store", f"sqlite:///{tmp_path / 'none.db'}"],
        ["eval", "run", str(tmp_path / "missing.yaml"), "--name", "x", "--store", url, "--agents", AGENTS],
        ["eval", "report", "--out", str(tmp_path / "nowhere")],
        ["eval", "report", "--out", str(tmp_path), "--against", "b"],
    ]
    for argv in cases:
        result = runner.invoke(app, argv, env=env)
        assert result.exit_code == 2, (argv, result.output)
        [line] = result.output.strip().splitlines()
        assert line.startswith("error: "), (argv, result.output)
    built = runner.invoke(app, ["eval", "build", str(tmp_path / "shop.json"), "--store", url], env=env)
    assert built.exit_code == 0, built.output
    bad_tools = ["eval", "run", str(tmp_path / "shop.json"), "--name", "x", "--store", url, "--agents", AGENTS]
    result = runner.invoke(app, [*bad_tools, "--tools", "sometimes"], env=env)
    assert result.exit_code == 2 and "--tools must be replay or live" in result.output
