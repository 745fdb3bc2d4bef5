"""Where a webhook may be POSTed: the form of its URL, and the addresses its host resolves to.

A webhook is a request the server makes for a tenant, from inside the server's network. A tenant
who could name any address would reach what only the server can: services on its loopback, the
private network behind it, a cloud's metadata endpoint (``169.254.169.254``,
``metadata.google.internal``). Two checks stand in the way:

- the URL's form, at the request (``check_webhook_url``): ``http`` or ``https``, a host, a port in
  1-65535, at most ``MAX_URL_LENGTH`` characters, and no whitespace or control character anywhere
  (a CR/LF used to pass the request and then fail every delivery);
- the addresses, at every delivery (``resolve_target``), and at the request where the server can
  tell in time (a cron's webhook): the host is resolved off the event loop and every address must
  be public (``address_refusal``: not loopback, private, link-local, shared (CGNAT), unspecified,
  multicast or reserved, nor an IPv6 form that embeds such an IPv4 address), and names that only
  mean the machine or its cloud (``localhost``, ``metadata``, ``*.internal``) are refused before
  any lookup. Numeric spellings such as ``http://0x7f000001/`` or ``http://2130706433/`` resolve
  to what they spell and are refused with it.

The POST then goes to the address that was checked (``Target.pinned``): the URL's host becomes
that address while the ``Host`` header, the TLS server name and the certificate check keep the
name, so a DNS answer that changes between the check and the connection (rebinding) is never
used. Redirects are not followed (``repertory.http.webhooks`` sends with ``follow_redirects=False``).

``HostPolicy`` is the explicit way past the address check, for tests and development: exact host
names or CIDRs (``repertory serve --allow-webhook-host 127.0.0.1`` delivers to a receiver on
loopback), or every non-public address at once (``allow_private``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = [
    "MAX_URL_LENGTH",
    "HostPolicy",
    "Resolver",
    "Target",
    "WebhookRefused",
    "address_refusal",
    "check_webhook_url",
    "resolve_target",
    "system_resolver",
]

MAX_URL_LENGTH = 2048
"""The longest webhook URL accepted, in characters."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves ``(host, port)`` to addresses (``system_resolver``: the operating system's, off the loop)."""

_BLOCKED_NAMES = frozenset(
    {
        "localhost",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
# Names that mean this machine (RFC 6761) or a private network (ICANN's reserved .internal).
_BLOCKED_SUFFIXES = (".localhost", ".internal")
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598 carrier-grade NAT: not public, yet not is_private
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible addresses, ::a.b.c.d


class WebhookRefused(ValueError):
    """A webhook URL the server will not POST to: its form, or where its host leads."""


def check_webhook_url(url: str) -> str:
    """``url`` if it is a well-formed absolute ``http(s)`` URL a webhook may name, else ``WebhookRefused``.

    The form only, no lookup: what a request body is checked against (``RunCreate``, a cron's
    ``webhook``) and what every delivery checks again before anything else, for rows written
    before these checks.
    """
    if not isinstance(url, str) or not url:
        raise WebhookRefused("webhook must be an absolute http(s) URL")
    if len(url) > MAX_URL_LENGTH:
        raise WebhookRefused(f"webhook is longer than {MAX_URL_LENGTH} characters")
    for i, char in enumerate(url):
        if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:  # CR and LF among them: a header injected, or a dead row
            raise WebhookRefused(f"webhook holds a control character at {i}: {char!r}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WebhookRefused("webhook must be an absolute http(s) URL (http://host[:port]/path)")
    blank = next((i for i, char in enumerate(url) if char.isspace()), None)
    if blank is not None:
        raise WebhookRefused(f"webhook holds whitespace at {blank} (a space in a URL is written %20)")
    if not parts.hostname:
        raise WebhookRefused("webhook needs a host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise WebhookRefused("webhook port must be a number from 1 to 65535")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise WebhookRefused(f"webhook is not a valid URL: {exc}") from None
    return url


def _embedded(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, compatible, NAT64), which is where it leads."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):  # :: and ::1 are themselves
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: Address) -> str | None:
    """Why ``ip`` is no public address (``"loopback"``, ``"private"``, ...), or ``None`` when it is one."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded(ip)
        if inner is not None:
            return address_refusal(inner)
        for carried in (ip.sixtofour, ip.teredo[1] if ip.teredo else None):  # tunnels to an IPv4 address
            if carried is not None and (why := address_refusal(carried)) is not None:
                return why
    checks: tuple[tuple[bool, str], ...] = (
        (ip.is_loopback, "loopback"),
        (ip.is_unspecified, "unspecified"),
        (ip.is_link_local, "link-local"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED, "shared (carrier-grade NAT)"),
        (ip.is_private, "private"),
        (ip.is_multicast, "multicast"),
        (ip.is_reserved, "reserved"),
        (not ip.is_global, "non-public"),
    )
    return next((why for failed, why in checks if failed), None)


def _name(host: str) -> str:
    return host.lower().rstrip(".")


def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 zone names an interface, not an address
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which non-public webhook hosts a server may POST to anyway: none unless configured.

    ``names`` are exact host names (lowercase, no trailing dot) whose every address is accepted;
    ``networks`` accept the addresses inside them; ``allow_private`` accepts every address and
    name (development only). Built from ``--allow-webhook-host`` values by ``parse``.
    """

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    allow_private: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str], *, allow_private: bool = False) -> HostPolicy:
        """A policy from host names, addresses and CIDRs (``127.0.0.1``, ``10.0.0.0/8``, ``hooks.lan``).

        ``ValueError`` names an entry that is neither an address, a network nor a host name.
        """
        names: set[str] = set()
        networks: list[Network] = []
        for raw in entries:
            entry = raw.strip() if isinstance(raw, str) else ""
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _name(entry)
            if not name or any(c in name for c in "/:@ \t\r\n[]") or not name.isascii():
                raise ValueError(f"an allowed webhook host is a host name, an address or a CIDR, not {raw!r}")
            names.add(name)
        return cls(frozenset(names), tuple(networks), allow_private)

    def admits(self, ip: Address) -> bool:
        """Whether ``ip`` is allowed although it may not be public (inside an allowed network)."""
        if self.allow_private:
            return True
        mapped = _embedded(ip) if isinstance(ip, ipaddress.IPv6Address) else None
        return any(a in net for a in (ip, mapped) if a is not None for net in self.networks if a.version == net.version)


@dataclass(frozen=True, slots=True)
class Target:
    """A webhook URL with the addresses it was checked at: where its POST may go, and nowhere else."""

    url: httpx.URL
    host: str
    addresses: tuple[str, ...]

    def pinned(self, address: str) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
        """The URL, headers and request extensions that POST to ``address`` in the name of the URL's host.

        ``Host`` keeps the name (and port) the caller gave; for ``https`` the TLS server name, and
        so the certificate check, is the name too. Only with the connection pool off may two
        names at one address not share a connection (the sender's ``max_keepalive_connections=0``).
        """
        headers = {"Host": self.url.netloc.decode("ascii")}
        extensions: dict[str, Any] = {}
        if self.url.scheme == "https" and _address(self.host) is None:
            extensions["sni_hostname"] = self.host
        return self.url.copy_with(host=address), headers, extensions


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the operating system's resolver, looked up on a worker thread."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def resolve_target(url: str, policy: HostPolicy, resolver: Resolver, lookup_s: float) -> Target:
    """Check ``url``'s form, resolve its host (within ``lookup_s`` seconds) and check every address: the ``Target``.

    ``WebhookRefused`` when the URL or any of its addresses may not be posted to (for good: the
    delivery fails); ``OSError`` or ``TimeoutError`` when the lookup itself fails (worth a retry).
    """
    parsed = httpx.URL(check_webhook_url(url))
    host = _name(parsed.raw_host.decode("ascii"))
    named = host in policy.names or policy.allow_private
    if not named and (host in _BLOCKED_NAMES or host.endswith(_BLOCKED_SUFFIXES)):
        raise WebhookRefused(f"webhook host {host!r} names this machine or its cloud's metadata service")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    literal = _address(host)
    if literal is not None:
        found: Sequence[str] = [str(literal)]
    else:
        async with asyncio.timeout(lookup_s):
            found = await resolver(host, port)
        if not found:
            raise OSError(f"webhook host {host!r} has no address")
    addresses = []
    for text in found:
        ip = _address(text)
        if ip is None:
            raise WebhookRefused(f"webhook host {host!r} resolved to {text!r}, which is no IP address")
        why = None if named or policy.admits(ip) else address_refusal(ip)
        if why is not None:
            raise WebhookRefused(
                f"webhook host {host!r} leads to {ip}, which is not a public address ({why}): the server posts "
                "only to public addresses unless it is started with --allow-webhook-host"
            )
        addresses.append(str(ip))
    return Target(parsed, host, tuple(addresses))
