"""repertory over HTTP: LangGraph's flavour of the Agent Protocol, so its clients work unchanged.

``create_app(runtime, api_keys=None)`` returns an ASGI app; ``repertory serve`` runs it with
uvicorn. An assistant is an agent, a thread is a session, a run is a turn's run; approvals and
``suspend()`` are interrupts that a run with ``command={"resume": ...}`` answers. Needs the
``http`` extra (FastAPI and uvicorn), which ``import repertory`` never imports.
"""

from repertory._extras import require

require("repertory.http", "http")

from repertory.http.app import create_app  # noqa: E402
from repertory.http.errors import HttpError  # noqa: E402

__all__ = ["HttpError", "create_app"]
