"""``repertory.core.ids``: ids are 26-char, unique and time-ordered; tokens are random, URL-safe hex."""

from __future__ import annotations

import re

import pytest

from repertory.core import ids
from repertory.core.ids import new_id, new_token, now_ms

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def decode_ms(value: str) -> int:
    """The millisecond timestamp in an id's first 10 characters (48 bits)."""
    number = 0
    for char in value:
        number = number * 32 + CROCKFORD.index(char)
    return number >> 80


def test_new_id_shape() -> None:
    for _ in range(1_000):
        value = new_id()
        assert len(value) == 26
        assert set(value) <= set(CROCKFORD)
        assert value[0] in "01234567"  # 130 bits of characters carry 128 bits of value


def test_new_id_is_unique() -> None:
    values = [new_id() for _ in range(10_000)]
    assert len(set(values)) == len(values)


def test_new_id_carries_the_current_millisecond() -> None:
    before = now_ms()
    value = new_id()
    after = now_ms()
    assert before <= decode_ms(value) <= after


def test_new_id_orders_by_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 2_000))
    monkeypatch.setattr(ids, "now_ms", lambda: next(clock))
    values = [new_id() for _ in range(2_000)]
    # Each id comes from a later millisecond than the one before, whatever its random bits are.
    assert values == sorted(values)
    assert [decode_ms(v) for v in values] == list(range(1_700_000_000_000, 1_700_000_000_000 + 2_000))


def test_new_id_order_holds_at_the_extremes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids, "now_ms", lambda: 0)
    earliest = new_id()
    monkeypatch.setattr(ids, "now_ms", lambda: (1 << 48) - 1)
    latest = new_id()
    assert earliest.startswith("0000000000") and latest.startswith("7ZZZZZZZZZ")
    assert earliest < latest and len(earliest) == len(latest) == 26


def test_new_token_is_long_random_and_url_safe() -> None:
    tokens = [new_token() for _ in range(10_000)]
    assert len(set(tokens)) == len(tokens)
    assert all(len(t) == 48 for t in tokens)  # 192 bits in hex
    assert all(re.fullmatch(r"[0-9a-f]+", t) for t in tokens)  # URL-safe, and never starts with "-"
    # No timestamp inside: tokens minted together share no common prefix beyond chance.
    assert len({t[:4] for t in tokens[:100]}) > 90
