"""Who is looking at the UI, and proof that a form post came from one of its own pages.

The UI takes the same API keys as the HTTP API. The login form puts the key in a cookie that is
``HttpOnly`` (no script reads it) and ``SameSite=Strict`` (no other site's page sends it), scoped
to ``/ui``; each request resolves it through ``ApiKeys`` like an ``x-api-key`` header. Without
keys the server is open and the UI needs no login.

Tenancy, as the HTTP API has it (``repertory.http.auth``): the viewer is the key's ``Caller``, and
every page, count, plot, inbox item, decision and stream shows or touches only the sessions that
caller sees (its owner's; an admin key's and an open server's: all). Another owner's session is
answered 404 exactly like a session that does not exist.

CSRF: SameSite=Strict already keeps cross-site posts from carrying the key; every form also
carries a token, the HMAC of a per-browser random cookie under a per-process secret, and a post
whose token does not match is refused (403), as is one whose ``Origin`` names another host. The
secret is new at each start, so a form left open across a restart asks for a reload.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from repertory.core.principal import Principal
from repertory.core.tree import SessionRecord
from repertory.http.auth import ApiKeys, Caller
from repertory.http.errors import HttpError

__all__ = ["KEY_COOKIE", "CSRF_COOKIE", "Access", "Viewer"]

KEY_COOKIE = "repertory_key"
CSRF_COOKIE = "repertory_csrf"


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: the ``Caller`` their key makes them, and their form token."""

    caller: Caller
    csrf: str
    # A fresh CSRF cookie to set on the response (the browser had none yet), else ``None``.
    new_csrf_cookie: str | None = None

    @property
    def principal(self) -> Principal:
        """Who the viewer's key speaks for (what their messages and decisions are stamped with)."""
        return self.caller.principal

    @property
    def name(self) -> str:
        """How the page names the viewer."""
        return self.principal.id or self.principal.kind

    @property
    def owner(self) -> str | None:
        """The owner whose sessions alone this viewer sees; ``None``: every session (an admin, an open server)."""
        return None if self.caller.admin or self.caller.owner is None else self.caller.owner

    def sees(self, record: SessionRecord | None) -> bool:
        """Whether the viewer may see (and act on) ``record``; a missing session is seen by nobody."""
        return record is not None and self.caller.sees(record)


class Access:
    """Login by API key, and the CSRF tokens of the forms."""

    def __init__(self, keys: ApiKeys) -> None:
        self.keys = keys
        self._secret = secrets.token_bytes(32)

    @property
    def login_required(self) -> bool:
        """True when the server has API keys (so the UI has a login form)."""
        return self.keys.enabled

    def caller_for_key(self, key: str) -> Caller:
        """The ``Caller`` ``key`` makes; ``HttpError`` (401/403) when it is missing or unknown."""
        return self.keys.caller({"x-api-key": key} if key else {})

    def token_for(self, browser_secret: str) -> str:
        """The CSRF token of forms shown to the browser holding ``browser_secret``."""
        return hmac.new(self._secret, browser_secret.encode(), hashlib.sha256).hexdigest()

    def viewer(self, cookies: Mapping[str, str]) -> Viewer | None:
        """The viewer of a request, or ``None`` when a login is needed (no key, or an unknown one)."""
        try:
            # Without keys this is the open server's anonymous caller, who sees everything.
            caller = self.caller_for_key(cookies.get(KEY_COOKIE, ""))
        except HttpError:
            return None
        return self.anonymous_viewer(cookies, caller)

    def anonymous_viewer(self, cookies: Mapping[str, str], caller: Caller | None = None) -> Viewer:
        """A viewer before login: only the login and error pages are rendered for it (forms need a token too)."""
        browser = cookies.get(CSRF_COOKIE, "")
        fresh = None
        if len(browser) < 32:
            browser = fresh = secrets.token_urlsafe(32)
        return Viewer(caller or Caller(Principal.user(), "anonymous"), self.token_for(browser), fresh)

    def check_post(self, cookies: Mapping[str, str], headers: Mapping[str, str], token: str | None) -> None:
        """Refuse (403) a form post without this browser's token, or sent from another origin."""
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host", ""):
            raise HttpError("this form was posted from another site", status=403)
        browser = cookies.get(CSRF_COOKIE, "")
        expected = self.token_for(browser) if browser else ""
        if not token or not expected or not hmac.compare_digest(token, expected):
            raise HttpError(
                "the form is out of date (or not from this site): reload the page and try again", status=403
            )
