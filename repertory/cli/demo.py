"""``repertory demo``: the main job, a fleet of agent sessions on the embedded default (local Ray + SQLite).

The fleet itself is ``repertory.demo``; this is its command: options checked before anything
starts (a bad ``--backend``, ``--model`` or ``--otlp-endpoint`` is one ``error:`` line), then the
fleet runs to the end and a failed project fails the command.
"""

from __future__ import annotations

import asyncio

import typer

from repertory.cli._options import (
    DEFAULT_STORE,
    OtlpEndpointOption,
    StoreOption,
    check_otlp_endpoint,
    otlp_runtime_options,
)
from repertory.errors import RepertoryError
from repertory.runtime import freeze_startup, tune_gc

__all__ = ["demo", "register"]


def demo(
    sessions: int = typer.Option(50, "--sessions", min=1, help="How many orchestrator trees."),
    backend: str = typer.Option("ray", "--backend", help="ray (starts a local Ray) or local."),
    store: StoreOption = DEFAULT_STORE,
    model: str | None = typer.Option(
        None, "--model", help="An OpenAI-compatible model for the workers, e.g. openai:gpt-4o-mini."
    ),
    delay: float = typer.Option(0.2, "--delay", min=0.0, help="Seconds a scripted model takes per reply (about)."),
    out: str = typer.Option(".repertory/export", "--out", help="Where the Parquet export goes."),
    otlp_endpoint: OtlpEndpointOption = None,
) -> None:
    """The main job: a fleet of agent sessions on the embedded default (local Ray + SQLite)."""
    if backend not in ("ray", "local"):
        raise RepertoryError(f"--backend must be ray or local, not {backend!r}")
    if otlp_endpoint is not None:
        check_otlp_endpoint(otlp_endpoint)
    tracing_options = otlp_runtime_options(backend, otlp_endpoint)
    from repertory.demo import run_demo

    real = None
    if model is not None:
        from repertory.models import infer_model

        try:
            real = infer_model(model)
        except ValueError as exc:
            raise RepertoryError(str(exc)) from None
    tune_gc()  # this process holds the whole fleet's client side (see repertory.runtime.gc_tuning)
    freeze_startup()  # the modules and agents imported above live as long as the process
    stats = asyncio.run(
        run_demo(
            sessions=sessions,
            backend="ray" if backend == "ray" else "local",
            store=store,
            model=real,
            delay=delay,
            export_dir=out,
            runtime_options=tracing_options,
        )
    )
    if stats.errors:
        raise RepertoryError(f"{len(stats.errors)} project(s) failed: {stats.errors[0]}")


def register(app: typer.Typer) -> None:
    """Attach ``demo`` to the ``repertory`` app."""
    app.command("demo", short_help="Run a fleet of agent sessions (local Ray + SQLite), then report.")(demo)
