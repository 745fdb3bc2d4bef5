"""The web UI: sessions, a session's conversation and tree, the approvals inbox, live runs (docs/guides/web-ui.md).

``WebUI(runtime, keys).app`` is an ASGI app; ``create_app`` mounts it at ``/ui`` and
``repertory ui`` serves ``ui_only_app(runtime, api_keys)``, the UI alone. Jinja2 renders every
page on the server, htmx (vendored in ``static/``, 0BSD) updates a panel in place, and a session
page follows its live run over server-sent events. Needs the ``http`` extra (FastAPI, uvicorn,
Jinja2).
"""

from repertory.http.ui.app import WebUI, ui_only_app

__all__ = ["WebUI", "ui_only_app"]
