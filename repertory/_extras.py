"""``require(part, extra)``: one clear error when a part of repertory is used without its extra.

A plain ``pip install repertory`` brings pydantic, the SQLite store and the CLI (typer, rich); every
other part has an extra in pyproject.toml (``ray``, ``postgres``, ``analytics``, ``memory``,
``openai``, ``http``, ``mcp``, ``a2a``, ``anthropic``, ``google``, ``otel``, ``evals``; ``all`` has them all).
Each optional package calls ``require`` before its first import of a dependency, so a missing one surfaces as one
``MissingExtra`` (an ``ImportError``) that says what to install, not as a bare
``No module named 'pyarrow'`` from whichever module happened to import it first.
"""

from __future__ import annotations

import importlib

from repertory.errors import MissingExtra

__all__ = ["EXTRAS", "installed", "require"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "ray": ("ray",),
    "postgres": ("psycopg", "psycopg_pool"),
    "analytics": ("pyarrow", "duckdb"),
    "memory": ("numpy",),
    "openai": ("openai",),
    "http": ("fastapi", "uvicorn", "jinja2", "httpx", "ag_ui.core"),
    "mcp": ("mcp", "jsonschema", "httpx2"),
    "a2a": ("a2a.types", "a2a.client", "a2a.server.routes", "sse_starlette", "starlette"),
    "anthropic": ("anthropic",),
    "google": ("google.genai",),
    "otel": ("opentelemetry.trace", "opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"),
    "evals": ("pydantic_evals", "pyarrow", "duckdb"),
}
"""The modules each extra's packages provide (pyproject.toml lists the packages themselves)."""


def require(part: str, extra: str) -> None:
    """Import the modules of ``extra``, or raise ``MissingExtra`` naming ``part`` and the extra to install.

    The modules are imported, not just looked up: ``part`` imports them next anyway, and a package
    that is installed but broken fails here with its own error chained as the cause. A package
    that is simply absent gets no chained cause: the message says everything.
    """
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            error = MissingExtra(
                f"{part} needs the {extra} extra: pip install 'repertory[{extra}]'",
                extra=extra,
                name=module.partition(".")[0],
            )
            gone = exc.name if isinstance(exc, ModuleNotFoundError) else None
            absent = gone is not None and (module == gone or module.startswith(gone + "."))
            raise error from (None if absent else exc)


def installed(extra: str) -> bool:
    """Whether the modules of ``extra`` import (for optional wiring, such as a reader per store)."""
    try:
        require(extra, extra)
    except MissingExtra:
        return False
    return True
