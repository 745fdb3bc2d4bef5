"""Who is looking at the UI, and proof that a form post came from one of its own pages.

The UI takes the same API keys as the HTTP API, typed once into its login form. A login checks
the key (wrong keys count against the address like the API's, ``ApiKeys``) and opens a
server-side session (``logins.Logins``); the browser's cookie holds only that session's random
id, ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it),
``Secure`` when the page came over https, scoped to ``/ui``. The key itself never leaves the
login request. Logging out closes the session here, so a copied cookie stops working with it; a
session unused for ``ServerLimits.ui_session_s`` is closed too. Without keys the server is open
and the UI needs no login.

Tenancy, as the HTTP API has it (``repertory.http.auth``): the viewer is the key's ``Caller``, and
every page, count, plot, inbox item, decision and stream shows or touches only the sessions that
caller sees (its owner's; an admin key's and an open server's: all). Another owner's session is
answered exactly like a session that does not exist.

CSRF: SameSite=Strict already keeps cross-site posts from carrying the session; every form also
carries a token, and a post whose token does not match is refused (403), as is one whose
``Origin`` names another host. A logged-in viewer's token is its session's own (random, made at
login), so the token a browser was shown before it logged in is worthless after; before login
(the login form) and on an open server the token is the HMAC of a per-browser random cookie under
a per-process secret, and that cookie is replaced at login. The secret and the sessions are new
at each start, so a form left open across a restart asks for a reload (and a login).
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
from repertory.http.limits import DEFAULT_LIMITS, ServerLimits
from repertory.http.ui.logins import Logins

__all__ = ["CSRF_COOKIE", "SESSION_COOKIE", "Access", "Viewer"]

SESSION_COOKIE = "repertory_session"
CSRF_COOKIE = "repertory_csrf"
_MIN_BROWSER_SECRET = 32


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: the ``Caller`` their login makes them, and their form token."""

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
    """Login by API key into a server-side session, and the CSRF tokens of the forms."""

    def __init__(self, keys: ApiKeys, limits: ServerLimits = DEFAULT_LIMITS) -> None:
        self.keys = keys
        self.logins = Logins(limits.ui_session_s, limits.max_ui_sessions)
        self._secret = secrets.token_bytes(32)

    @property
    def login_required(self) -> bool:
        """True when the server has API keys (so the UI has a login form)."""
        return self.keys.enabled

    def log_in(self, key: str, client: str | None) -> str:
        """Check ``key`` (sent from address ``client``) and open a session; returns its id, the cookie's value.

        ``HttpError``: 401 without a key, 403 for an unknown one, 429 while ``client`` has sent
        too many unknown keys (the API's count: guessing through the form is no faster).
        """
        caller = self.keys.caller({"x-api-key": key} if key else {}, client)
        return self.logins.open(caller)

    def log_out(self, cookies: Mapping[str, str]) -> None:
        """Close the session the request's cookie names (a copy of the cookie is worthless from now on)."""
        self.logins.close(cookies.get(SESSION_COOKIE, ""))

    def token_for(self, browser_secret: str) -> str:
        """The CSRF token of forms shown before login to the browser holding ``browser_secret``."""
        return hmac.new(self._secret, browser_secret.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def new_browser_secret() -> str:
        """A fresh per-browser CSRF cookie value (set at login, so the token shown before it is void)."""
        return secrets.token_urlsafe(_MIN_BROWSER_SECRET)

    def viewer(self, cookies: Mapping[str, str]) -> Viewer | None:
        """The viewer of a request, or ``None`` when a login is needed (no session, or a closed one)."""
        if not self.login_required:
            return self.anonymous_viewer(cookies, Caller(Principal.user(), "anonymous"))
        login = self.logins.find(cookies.get(SESSION_COOKIE, ""))
        if login is None:
            return None
        return Viewer(login.caller, login.csrf)

    def anonymous_viewer(self, cookies: Mapping[str, str], caller: Caller | None = None) -> Viewer:
        """A viewer before login: only the login and error pages are rendered for it (forms need a token too)."""
        browser = cookies.get(CSRF_COOKIE, "")
        fresh = None
        if len(browser) < _MIN_BROWSER_SECRET:
            browser = fresh = self.new_browser_secret()
        return Viewer(caller or Caller(Principal.user(), "anonymous"), self.token_for(browser), fresh)

    def login_token(self, cookies: Mapping[str, str]) -> str:
        """The token the login form of this browser carries; ``""`` (matching nothing) without its cookie."""
        browser = cookies.get(CSRF_COOKIE, "")
        return self.token_for(browser) if len(browser) >= _MIN_BROWSER_SECRET else ""

    @staticmethod
    def check_post(headers: Mapping[str, str], token: str | None, expected: str) -> None:
        """Refuse (403) a form post whose token is not ``expected``, or sent from another origin."""
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host", ""):
            raise HttpError("this form was posted from another site", status=403)
        if not token or not expected or not hmac.compare_digest(token, expected):
            raise HttpError(
                "the form is out of date (or not from this site): reload the page and try again", status=403
            )
