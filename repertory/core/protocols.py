"""Why an object is not an instance of a runtime-checkable protocol, in words a store's author can act on.

``isinstance(store, TreeStore)`` answers yes or no. A store written outside repertory that fails it
needs to know which members it lacks, and one reason is easy to miss: from Python 3.12 on,
``isinstance`` looks members up with ``inspect.getattr_static``, so a wrapper that delegates to an
inner store through ``__getattr__`` has none of them, although every call through it would work
(on 3.11 the same wrapper passes). ``protocol_gap`` names the missing members as this Python looks
them up, and says so when ``__getattr__`` is why.
"""

from __future__ import annotations

import inspect
import sys
import typing
from typing import Any

__all__ = ["protocol_gap", "protocol_members"]

_STATIC = sys.version_info >= (3, 12)
_MISSING = object()


def protocol_members(protocol: type) -> list[str]:
    """The member names ``isinstance`` checks for ``protocol`` (its own and its protocol bases'), sorted.

    ``typing``'s own list, which it names differently per version: ``get_protocol_members`` from
    3.13, the ``__protocol_attrs__`` it caches on the class in 3.12, its helper in 3.11.
    """
    if sys.version_info >= (3, 13):
        return sorted(typing.get_protocol_members(protocol))
    untyped: Any = protocol if sys.version_info >= (3, 12) else typing  # neither name is in typeshed
    if sys.version_info >= (3, 12):
        return sorted(untyped.__protocol_attrs__)
    return sorted(untyped._get_protocol_attrs(protocol))  # noqa: SLF001 - typing's own list; 3.11 has no public name


def _has(obj: object, name: str) -> bool:
    if _STATIC:
        return inspect.getattr_static(obj, name, _MISSING) is not _MISSING
    return hasattr(obj, name)


def protocol_gap(obj: Any, protocol: type) -> str | None:
    """``None`` when ``obj`` is an instance of ``protocol``; else what it lacks, as one sentence.

    The sentence names the type, the protocol and every missing member (looked up the way this
    Python's ``isinstance`` looks them up), and adds the ``__getattr__`` explanation when the
    members are there only through it.
    """
    if isinstance(obj, protocol):
        return None
    kind = type(obj).__name__
    missing = [name for name in protocol_members(protocol) if not _has(obj, name)]
    if not missing:
        return f"{kind} is not a {protocol.__name__}"
    said = f"{kind} is not a {protocol.__name__}: it lacks {', '.join(missing)}"
    if _STATIC and inspect.getattr_static(type(obj), "__getattr__", _MISSING) is not _MISSING:
        reachable = [name for name in missing if hasattr(obj, name)]
        if reachable:
            which = "all of them" if len(reachable) == len(missing) else ", ".join(reachable)
            said += (
                f" ({which} only through __getattr__, which isinstance() does not consult from Python 3.12 on: "
                "define them on the class)"
            )
    return said
