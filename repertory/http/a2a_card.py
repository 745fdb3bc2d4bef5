"""An agent's A2A agent card: who it is, what it can do, where and how to call it, and how to answer it.

- ``name`` is the assistant id; ``description`` is ``Agent(description=...)``, else the first
  paragraph of its instructions, else a sentence naming it;
- one skill per tool (its name and the first line of its description; tagged ``needs-approval``
  when a call may wait for a human), or one skill for the agent itself when it has no tools;
- ``capabilities``: streaming and push notifications, and the ``DECISIONS`` extension: the shape of
  the answer an ``input-required`` task takes (``repertory.http.a2a_answers``), as a JSON schema in
  its ``params``;
- one interface, JSON-RPC (A2A 1.0) at ``/a2a/{assistant_id}`` on the URL the card was asked on;
- when the server has keys, the two ways to send one (``x-api-key`` or ``Authorization: Bearer``)
  as security schemes, either of which suffices.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from google.protobuf import json_format, struct_pb2

from repertory.runtime import Agent

__all__ = ["DECISIONS", "DECISION_SCHEMA", "agent_card"]

DECISIONS = "urn:repertory:a2a:decisions:v1"
"""The extension naming how an ``input-required`` task is answered (its schema is the extension's params)."""

DECISION_SCHEMA: dict[str, Any] = {
    "description": (
        "The next message on an input-required task answers it, once. Tool calls waiting for approval: "
        "a data part per call, in the order the status message's data part lists them (a list, or "
        '{"decisions": [...]}, answers several). A suspend() question: the message\'s text is the answer.'
    ),
    "type": "object",
    "properties": {
        "decision": {"enum": ["approve", "reject", "edit"]},
        "reason": {"type": "string", "description": "why a call is rejected (the agent reads it)"},
        "args": {"type": "object", "description": "for edit: the call's new arguments"},
    },
    "required": ["decision"],
}
"""The data part that answers one tool call waiting for approval."""


def _first_paragraph(text: str | None) -> str:
    return (text or "").strip().split("\n\n", 1)[0].strip()


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(data, out)
    return out


def _skills(name: str, agent: Agent, description: str) -> list[AgentSkill]:
    skills = []
    for tool in agent.tools.values():
        tags = ["tool"] + (["needs-approval"] if tool.requires_approval is not False else [])
        about = _first_paragraph(tool.description).splitlines()[0] if tool.description else tool.name
        skills.append(AgentSkill(id=tool.name, name=tool.name, description=about, tags=tags))
    return skills or [AgentSkill(id=name, name=name, description=description, tags=["chat"])]


def agent_card(name: str, agent: Agent, rpc_url: str, *, keys: bool, version: str) -> AgentCard:
    """The card of assistant ``name`` served at ``rpc_url`` (see the module docstring)."""
    description = (
        (agent.description or "").strip()
        or _first_paragraph(agent.instructions)
        or f"The {name!r} agent, served by repertory: one message, one durable turn."
    )
    card = AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=rpc_url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=True,
            extensions=[
                AgentExtension(
                    uri=DECISIONS,
                    description="How an input-required task is answered: approve, reject or edit a tool call, or text.",
                    required=False,
                    params=_struct(DECISION_SCHEMA),
                )
            ],
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=_skills(name, agent, description),
    )
    if keys:
        card.security_schemes["apiKey"].CopyFrom(
            SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(location="header", name="x-api-key"))
        )
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.extend(
            [
                SecurityRequirement(schemes={"apiKey": StringList()}),
                SecurityRequirement(schemes={"bearer": StringList()}),
            ]
        )
    return card
