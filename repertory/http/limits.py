"""``ServerLimits``: every bound one tenant's requests meet, in one place, with documented defaults.

A server shared by tenants must survive each of them: no request body, stream, cron, remembered
run or failed key may grow without a bound, and none of those bounds may be reachable by one
tenant at the cost of another. ``create_app`` and ``ui_only_app`` take one ``ServerLimits``;
``repertory serve`` and ``repertory ui`` build it from their options. The defaults suit a server
of a few hundred tenants on one machine; each is a plain field so a deployment can set its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from repertory.core.json_limits import DEFAULT_MAX_DEPTH, MAX_SAFE_DEPTH

__all__ = ["DEFAULT_LIMITS", "ServerLimits"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The bounds a server enforces per request, per key and per owner.

    - ``max_body_bytes``: the largest request body of any route (413 above it), the web UI's
      forms included, checked before the body is read whole.
    - ``max_json_depth``: the deepest nesting of arrays and objects a JSON body (or a CLI
      ``--json`` value) may have, well below what the stores can read back (422 above it; at
      most ``MAX_SAFE_DEPTH``, 128).
      Non-finite numbers (``NaN``, ``Infinity``) are refused everywhere, whatever the depth.
    - ``max_streams_per_key``: open streams per key, of every kind (run streams, event streams,
      the web UI's live views) against one count (429 above it).
    - ``max_crons_per_owner`` and ``min_cron_interval_s``: how many schedules one owner may keep,
      and the shortest interval between two firings of one schedule (422 below it).
    - ``run_book_bytes``: the request bodies of recent runs the server remembers (for
      ``GET /threads/{id}/runs/{run_id}``), counted by their size, oldest forgotten first.
    - ``header_timeout_s``: a connection must send a request's headers within this long;
      ``body_timeout_s``: and its body; ``keep_alive_s``: an idle connection is closed after it.
    - ``failed_keys_per_minute``: wrong API keys one client address may send in a minute before
      it is answered 429 until the minute has passed.
    - ``min_key_length``: the shortest API key accepted at start.
    - ``ui_session_s``: how long a web UI login lasts without use; ``max_ui_sessions``: how many
      logins the web UI keeps at once (the least recently used is logged out past it).
    """

    max_body_bytes: int = 1 << 20
    max_json_depth: int = DEFAULT_MAX_DEPTH
    max_streams_per_key: int = 16
    max_crons_per_owner: int = 100
    min_cron_interval_s: int = 60
    run_book_bytes: int = 64 << 20
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: float = 5.0
    failed_keys_per_minute: int = 30
    min_key_length: int = 16
    ui_session_s: int = 12 * 3600
    max_ui_sessions: int = 10_000

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_json_depth",
            "max_streams_per_key",
            "max_crons_per_owner",
            "run_book_bytes",
            "failed_keys_per_minute",
            "ui_session_s",
            "max_ui_sessions",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("min_cron_interval_s", "min_key_length"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.max_json_depth > MAX_SAFE_DEPTH:  # deeper, a value could be stored that no read gets back
            raise ValueError(f"max_json_depth must be <= {MAX_SAFE_DEPTH}")


DEFAULT_LIMITS = ServerLimits()
"""The bounds a server has when it is given none."""
