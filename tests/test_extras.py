"""Extras: a plain install runs repertory on SQLite; every optional part names the extra it needs.

The plain install is simulated in a child interpreter whose import system refuses every optional
dependency (a ``sys.meta_path`` finder that raises ``ModuleNotFoundError`` for them, as Python does
for a package that is not installed), so the check runs in this very environment, which has them all.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from repertory._extras import EXTRAS, installed, require
from repertory.errors import MissingExtra

ROOT = Path(__file__).resolve().parents[1]

# What `pip install repertory` leaves out: the top-level modules of every extra's packages.
BLOCKED = ["ray", "psycopg", "psycopg_pool", "pyarrow", "duckdb", "numpy", "fastapi", "uvicorn", "openai"]
BLOCKED += ["mcp", "anthropic", "opentelemetry", "pydantic_evals"]

# Each optional part, the extra it names, and how a user reaches it.
PARTS = {
    "repertory.actors": "ray",
    "repertory.storage.postgres": "postgres",
    "repertory.storage.export": "analytics",
    "repertory.analytics": "analytics",
    "repertory.memory": "memory",
    "repertory.models": "openai",
    "repertory.http": "http",
    "repertory.mcp": "mcp",
    "repertory.evals": "evals",
}

HOOK = """
import importlib.abc, sys

BLOCKED = set({blocked!r})
tried = []

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in BLOCKED:
            tried.append(top)
            raise ModuleNotFoundError(f"No module named {{top!r}}", name=top)
        return None

sys.meta_path.insert(0, NotInstalled())
"""

CHECKS = """
import asyncio, importlib, json, os

import repertory
from repertory import Agent, Runtime, StoreError
from repertory.errors import MissingExtra
from repertory.storage import open_store
from repertory.testing import ScriptedModel

out = {{"after_import": sorted(set(tried))}}

async def plain(path):
    store = await open_store(f"sqlite:///{{path}}")
    await store.close()
    agent = Agent(name="a", model=ScriptedModel([{{"tool": "add", "args": {{"a": 2, "b": 3}}}}, {{"text": "5"}}]),
                  tools=[add])
    async with await Runtime.start(store=f"sqlite:///{{path}}", backend="local", agents={{"a": agent}}) as rt:
        h = await rt.create_session(agent="a")
        result = await h.run("2 + 3?")
        return [result.status, result.text]

def add(a: int, b: int) -> int:
    return a + b

out["run"] = asyncio.run(plain(os.path.join({tmp!r}, "plain.db")))

def error_of(thunk):
    try:
        thunk()
    except MissingExtra as exc:
        return {{"type": "MissingExtra", "message": str(exc), "extra": exc.extra, "name": exc.name,
                "chained": exc.__cause__ is not None or not exc.__suppress_context__}}
    except Exception as exc:
        return {{"type": type(exc).__name__, "message": str(exc)}}
    return None

out["parts"] = {{part: error_of(lambda part=part: importlib.import_module(part)) for part in {parts!r}}}

async def postgres_url():
    await open_store("postgresql://user@127.0.0.1:1/db")

async def ray_backend():
    await Runtime.start(store="memory://", backend="ray", agents={{"a": Agent(name="a", model=ScriptedModel([]))}})

out["postgres_url"] = error_of(lambda: asyncio.run(postgres_url()))
out["ray_backend"] = error_of(lambda: asyncio.run(ray_backend()))
out["model_string"] = error_of(lambda: Agent(name="m", model="openai:gpt-4o-mini"))
# The engine calls repertory.tracing on every drive: without opentelemetry it imports and does nothing.
tracing = importlib.import_module("repertory.tracing")
out["tracing_on"] = tracing.tracing_on()
out["tracing_configure"] = error_of(lambda: tracing.configure_otlp("http://127.0.0.1:4318"))
print(json.dumps(out))
"""


def run_plain(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child interpreter where every optional dependency is missing."""
    script = HOOK.format(blocked=BLOCKED) + code
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=90, cwd=cwd, check=False
    )


def test_a_plain_install_runs_on_sqlite_and_each_part_names_its_extra(tmp_path: Path) -> None:
    proc = run_plain(CHECKS.format(tmp=str(tmp_path), parts=list(PARTS)))
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out["after_import"] == []  # `import repertory` does not even try an optional package
    assert out["run"] == ["done", "5"]
    for part, extra in PARTS.items():
        assert out["parts"][part] == {
            "type": "MissingExtra",
            "message": f"{part} needs the {extra} extra: pip install 'repertory[{extra}]'",
            "extra": extra,
            "name": EXTRAS[extra][0].partition(".")[0],
            "chained": False,  # one error, not a traceback of the missing module under it
        }, part
    assert out["postgres_url"]["type"] == "StoreError"
    assert "pip install 'repertory[postgres]'" in out["postgres_url"]["message"]
    assert "pip install 'repertory[ray]'" in out["ray_backend"]["message"]
    assert out["model_string"]["message"] == "repertory.models needs the openai extra: pip install 'repertory[openai]'"
    assert out["tracing_on"] is False
    assert out["tracing_configure"]["message"] == (
        "repertory.tracing.configure_otlp needs the otel extra: pip install 'repertory[otel]'"
    )


CLI = """
import sys
from repertory.cli import app
sys.argv = ["repertory", *sys.argv[1:]]
app()
"""


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["--help"], 0, "export"),
        (["serve", "--port", "0"], 2, "error: repertory serve needs the http extra: pip install 'repertory[http]'"),
        (
            ["export", "--store", "memory://", "--out", "out"],
            2,
            "error: repertory.storage.export needs the analytics extra: pip install 'repertory[analytics]'",
        ),
    ],
)
def test_the_cli_works_without_extras_and_names_the_missing_one(
    tmp_path: Path, argv: list[str], code: int, expected: str
) -> None:
    proc = run_plain(CLI, *argv, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert expected in (proc.stdout if code == 0 else proc.stderr.strip())


def test_every_extra_in_pyproject_is_checked_and_in_all() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    # Tooling, not parts of the package: the peers benchmarks measure against, and the docs site's build.
    optional = set(extras) - {"all", "dev", "bench", "docs", "local-embeddings"}
    assert optional == set(EXTRAS)
    assert extras["all"] == [f"repertory[{','.join(EXTRAS)}]"]
    assert "repertory[all,docs]" in extras["dev"]
    base = {requirement.split(">")[0].split("[")[0] for requirement in project["dependencies"]}
    assert base == {"pydantic", "typer", "rich", "cronsim"}  # cronsim: schedules are core, and it is one small module


def test_a_missing_module_gives_one_error_and_a_broken_one_keeps_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repertory_test_broken.py").write_text("raise ImportError('libbroken.so: cannot open shared object')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(EXTRAS, "absent", ("repertory_test_no_such_module",))
    monkeypatch.setitem(EXTRAS, "broken", ("repertory_test_broken",))

    with pytest.raises(
        MissingExtra, match=r"^part needs the absent extra: pip install 'repertory\[absent\]'$"
    ) as absent:
        require("part", "absent")
    assert absent.value.__cause__ is None and absent.value.__suppress_context__
    assert absent.value.name == "repertory_test_no_such_module" and absent.value.extra == "absent"

    with pytest.raises(MissingExtra, match="broken extra") as broken:
        require("part", "broken")
    assert isinstance(broken.value.__cause__, ImportError)
    assert "libbroken.so" in str(broken.value.__cause__)

    assert not installed("absent") and installed("analytics")
    require("part", "analytics")  # installed here: nothing raised


def test_missing_extra_is_an_import_error_and_pickles() -> None:
    error = MissingExtra("repertory.actors needs the ray extra: pip install 'repertory[ray]'", extra="ray", name="ray")
    assert isinstance(error, ImportError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is MissingExtra
    assert (str(again), again.extra, again.name) == (str(error), "ray", "ray")
