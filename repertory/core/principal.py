"""Who is speaking: principals, and the message kinds a handle can send.

Provenance is the runtime's job, never the caller's: a handle carries a ``Principal`` and every
message it sends is stamped with that principal's origin. The message types below have no origin
field and forbid extra fields, so no argument can claim to be someone else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from repertory.core.messages import ModelMessage, Origin
from repertory.core.trusted import trusted

__all__ = ["Message", "NotificationMessage", "Principal", "PrincipalKind", "UserMessage", "to_model_message"]

PrincipalKind = Literal["user", "mod", "session", "system"]


class Principal(BaseModel):
    """The caller behind a handle: a user, a mod, another session, or the system."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: PrincipalKind
    id: str | None = None

    @classmethod
    def user(cls, id: str | None = None) -> Principal:
        """A human user (the default principal of a handle)."""
        return cls(kind="user", id=id)

    @classmethod
    def mod(cls, id: str) -> Principal:
        """An extension acting on its own behalf; it can never speak as the user."""
        return cls(kind="mod", id=id)

    @classmethod
    def session(cls, id: str) -> Principal:
        """Another session (a child reporting back, say)."""
        return cls(kind="session", id=id)

    @classmethod
    def system(cls) -> Principal:
        """The runtime itself."""
        return cls(kind="system")

    @property
    def origin(self) -> Origin:
        """The origin stamped on what this principal says."""
        # A principal's fields are an origin's, validated when the principal was made.
        return trusted(Origin, kind=self.kind, id=self.id)

    @property
    def notification_origin(self) -> Origin:
        """A notification is a system event: a user's is stamped ``system``, anyone else's as themselves."""
        return Origin(kind="system") if self.kind == "user" else self.origin


class UserMessage(BaseModel):
    """Something said to the session; who said it comes from the handle's principal."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["user"] = "user"
    text: str


class NotificationMessage(BaseModel):
    """A system event for the session (background work reporting back), not something a user said."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["notification"] = "notification"
    title: str
    body: str


Message = str | UserMessage | NotificationMessage


def to_model_message(message: Message, principal: Principal) -> tuple[ModelMessage, Literal["message", "notification"]]:
    """Stamp a sent message with its principal's origin; anything else is a ``TypeError``."""
    # ``ModelMessage.user``/``system`` check the text is a str and build without validating again.
    if isinstance(message, str):
        return ModelMessage.user(message, origin=principal.origin), "message"
    if isinstance(message, UserMessage):
        return ModelMessage.user(message.text, origin=principal.origin), "message"
    if isinstance(message, NotificationMessage):
        text = f"{message.title}\n\n{message.body}"
        return ModelMessage.system(text, origin=principal.notification_origin), "notification"
    raise TypeError(
        f"send() takes a str, UserMessage or NotificationMessage, not {type(message).__name__}; "
        "the origin of a message is always the handle's principal"
    )
