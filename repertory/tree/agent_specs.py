"""Agents given by import path: ``"module:attr"`` names an ``Agent``, a dict of them, or a function returning either.

A runtime registers agents by name. On the Ray backend every host needs them too: an ``Agent``
object is pickled to the hosts, while a path is sent as text and imported by each host itself, so
the hosts run the code installed where they run (a restarted host on another node imports it
again) and nothing about the agent has to pickle. A fresh ``Runtime`` that registers the same
names recovers sessions another one created.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repertory.errors import RepertoryError
from repertory.runtime.agent import Agent

__all__ = ["AgentSpec", "import_agents", "resolve_agents"]

AgentSpec = Agent | str
"""An agent, or the ``module:attr`` path of one."""


def import_agents(path: str) -> dict[str, Agent]:
    """Import ``module:attr`` and turn it into ``{name: Agent}`` (a clear ``RepertoryError`` otherwise)."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise RepertoryError(f"an agent path must look like module:attr, not {path!r}")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RepertoryError(f"cannot import agents {path!r}: {exc}") from None
    except Exception as exc:  # the module itself fails: say where, in one line a CLI can print
        raise RepertoryError(f"cannot import agents {path!r}: {_where(exc)}") from exc
    if callable(obj) and not isinstance(obj, Agent):
        try:
            obj = obj()
        except Exception as exc:
            raise RepertoryError(f"cannot make agents from {path!r}: calling it raised {_where(exc)}") from exc
    if isinstance(obj, Agent):
        return {obj.name: obj}
    if isinstance(obj, dict) and obj and all(isinstance(a, Agent) for a in obj.values()):
        return dict(obj)
    raise RepertoryError(f"{path!r} is not an Agent, a dict of agents, or a function returning one")


def _where(exc: BaseException) -> str:
    """``TypeError: message (file.py:12)``: the error and the innermost line that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    place = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{place}"


def resolve_agents(specs: Mapping[str, AgentSpec]) -> dict[str, Agent]:
    """``{name: Agent}`` from agents and paths; a path must yield an agent for the name it is registered as.

    A path that yields one agent is registered under the given name; a path that yields several
    must hold that name among them.
    """
    agents: dict[str, Agent] = {}
    for name, spec in specs.items():
        if isinstance(spec, Agent):
            agents[name] = spec
            continue
        if not isinstance(spec, str):
            raise RepertoryError(f"agent {name!r} must be an Agent or a 'module:attr' path, not {type(spec).__name__}")
        found = import_agents(spec)
        if len(found) == 1:
            agents[name] = next(iter(found.values()))
        elif name in found:
            agents[name] = found[name]
        else:
            raise RepertoryError(f"{spec!r} holds agents {sorted(found)}, none named {name!r}")
    return agents
