"""The names one store's Ray deployment is found by: its namespace, its actors' names, a session's host.

Hosts and the supervisor are detached, named actors, so every process that joins a deployment
(the client that started it, another client on the same store, a host reaching its siblings, the
supervisor starting a dedicated host) finds them by deriving the same names from the store URL
and this code's version, with no registry to ask. Those derivations live here, and only here, so
the client, the hosts and the supervisor agree on them without importing each other.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "PREFIX",
    "VERSION",
    "dedicated_host_name",
    "deployment_namespace",
    "shared_host_index",
    "shared_host_name",
    "supervisor_name",
]

VERSION = "v6"
"""Bumped with incompatible host code: a detached actor keeps the code it started with."""
PREFIX = f"repertory-{VERSION}"
"""The start of every actor name of this code's deployments: a new version never finds an old one's actors."""


def deployment_namespace(store_url: str) -> str:
    """The Ray namespace of one store's hosts and supervisor (derived from the URL the hosts open)."""
    return f"repertory-{hashlib.blake2b(store_url.encode(), digest_size=6).hexdigest()}"


def shared_host_index(session_id: str, hosts: int) -> int:
    """Which shared host a session lives on: a stable hash, so any client computes it alone."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % hosts


def shared_host_name(prefix: str, index: int) -> str:
    """The Ray name of shared host ``index``."""
    return f"{prefix}-host-{index}"


def dedicated_host_name(prefix: str, session_id: str) -> str:
    """The Ray name of the host of one dedicated session."""
    return f"{prefix}-dedicated-{session_id}"


def supervisor_name(prefix: str) -> str:
    """The Ray name of the deployment's supervisor."""
    return f"{prefix}-supervisor"
