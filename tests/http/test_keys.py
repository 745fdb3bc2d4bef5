"""API keys that cannot mix tenants up, and a bound on guessing them (issue 39, identity).

Each test reproduces what a probe did to the server before: a tenant named like the admin key's
owner owned the admin's threads, one key given to two tenants silently became one of them, a
three-letter key was accepted, and a client could try keys as fast as the server answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from typer.testing import CliRunner, Result

from repertory import Runtime
from repertory.cli import app as cli
from repertory.core.principal import Principal
from repertory.http import create_app
from repertory.http.auth import ApiKeys, FailedKeys
from repertory.http.errors import HttpError
from repertory.http.limits import ServerLimits
from tests.http.agents import make_agents

LONG = "-0123456789abcdef"
runner = CliRunner()


def _error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_a_tenant_named_like_the_admin_is_refused() -> None:
    # An unnamed admin key speaks as "admin"; a tenant key named admin would own its threads.
    with pytest.raises(ValueError, match="'admin' is named by a tenant key and by an admin key"):
        ApiKeys([f"admin=tenant{LONG}"], [f"root{LONG}"])
    with pytest.raises(ValueError, match="'ops' is named by a tenant key and by an admin key"):
        ApiKeys({f"a{LONG}": Principal.user("ops")}, {f"b{LONG}": Principal.user("ops")})
    # Different names are fine, and one owner may hold two keys (a rotation).
    keys = ApiKeys([f"alice=one{LONG}", f"alice=two{LONG}"], [f"ops=root{LONG}"])
    assert keys.caller({"x-api-key": f"one{LONG}"}).owner == keys.caller({"x-api-key": f"two{LONG}"}).owner == "alice"


def test_one_key_for_two_owners_is_refused() -> None:
    with pytest.raises(ValueError, match="one key is given to two owners \\('alice' and 'bob'\\)"):
        ApiKeys([f"alice=shared{LONG}", f"bob=shared{LONG}"])
    with pytest.raises(ValueError, match="is also an admin key"):
        ApiKeys({f"shared{LONG}": Principal.user("alice")}, {f"shared{LONG}": Principal.user("ops")})


def test_short_keys_are_refused_without_printing_them() -> None:
    with pytest.raises(ValueError, match="the key of 'alice' has 6 characters; keys need at least 16") as caught:
        ApiKeys(["alice=s3cret"])
    assert "s3cret" not in str(caught.value)
    ApiKeys(["alice=s3cret"], limits=ServerLimits(min_key_length=6))  # a deployment may lower it


def test_serve_refuses_bad_keys_before_it_listens() -> None:
    base = ["serve", "--agents", "tests.http.agents:make_agents", "--port", "0", "--store", "memory://"]
    line = _error_line(runner.invoke(cli, [*base, "--api-key", "alice=short"]))
    assert "keys need at least 16" in line and "short" not in line
    line = _error_line(runner.invoke(cli, [*base, "--api-key", f"alice=k{LONG}", "--api-key", f"bob=k{LONG}"]))
    assert "one key is given to two owners" in line and LONG not in line
    line = _error_line(runner.invoke(cli, [*base, "--api-key", f"admin=t{LONG}", "--admin-key", f"r{LONG}"]))
    assert "'admin' is named by a tenant key and by an admin key" in line


def test_failed_keys_are_counted_per_address_in_one_minute_windows() -> None:
    now = [1000.0]
    failures = FailedKeys(3, clock=lambda: now[0])
    for _ in range(3):
        failures.check("10.0.0.1")
        failures.record("10.0.0.1")
    with pytest.raises(HttpError) as caught:
        failures.check("10.0.0.1")
    assert caught.value.status == 429 and caught.value.details["retry_after"] == 60
    failures.check("10.0.0.2")  # another address is not held back
    now[0] += 59.5
    with pytest.raises(HttpError):
        failures.check("10.0.0.1")
    now[0] += 0.5
    failures.check("10.0.0.1")  # the minute has passed
    failures.record("10.0.0.1")
    failures.check("10.0.0.1")


def test_failed_key_memory_is_bounded() -> None:
    failures = FailedKeys(1, clock=lambda: 5.0)
    for i in range(FailedKeys.MAX_ADDRESSES + 10):
        failures.record(f"addr-{i}")
    assert len(failures._windows) == FailedKeys.MAX_ADDRESSES
    failures.check("addr-0")  # the oldest was forgotten, not the newest
    with pytest.raises(HttpError):
        failures.check(f"addr-{FailedKeys.MAX_ADDRESSES + 9}")


@pytest.fixture
async def guarded() -> AsyncIterator[httpx.AsyncClient]:
    runtime = await Runtime.start(store="memory://", agents=make_agents())
    try:
        app = create_app(
            runtime,
            {f"alice{LONG}": Principal.user("alice")},
            limits=ServerLimits(failed_keys_per_minute=5),
        )
        transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://repertory") as client:
            yield client
    finally:
        await runtime.close()


async def test_guessing_keys_is_answered_429_even_with_the_right_key(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/ok", headers={"x-api-key": f"alice{LONG}"})).status_code == 200
    for i in range(5):
        assert (await guarded.get("/ok", headers={"x-api-key": f"guess-{i}{LONG}"})).status_code == 403
    blocked = await guarded.get("/ok", headers={"x-api-key": f"guess-5{LONG}"})
    assert blocked.status_code == 429 and 0 < int(blocked.headers["retry-after"]) <= 60
    assert "too many wrong API keys" in blocked.json()["detail"]
    # While blocked, the right key is refused too: a guesser learns nothing from the answers.
    assert (await guarded.get("/ok", headers={"x-api-key": f"alice{LONG}"})).status_code == 429
    # A missing key is no guess and is not counted (but is still refused while blocked).
    assert (await guarded.get("/ok")).status_code == 429
