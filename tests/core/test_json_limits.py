"""``repertory.core.json_limits``: JSON too deep or not finite is refused, with the path, never a RecursionError."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from repertory.core.json_limits import DEFAULT_MAX_DEPTH, MAX_SAFE_DEPTH, JsonRefused, check_json, dotted, parse_json


def _refused(text: str | bytes, **kw: object) -> JsonRefused:
    with pytest.raises(JsonRefused) as caught:
        parse_json(text, **kw)  # type: ignore[arg-type]
    return caught.value


def test_json_within_the_limits_parses_as_json_loads_does() -> None:
    text = '{"a": [1, 2.5, -3e10, "x\\"]", null, true], "b": {"c": {}}}'
    assert parse_json(text) == json.loads(text)
    assert parse_json("[" * DEFAULT_MAX_DEPTH + "]" * DEFAULT_MAX_DEPTH) == json.loads(
        "[" * DEFAULT_MAX_DEPTH + "]" * DEFAULT_MAX_DEPTH
    )
    assert parse_json(b'{"k": 1e308}') == {"k": 1e308}
    # Brackets inside strings are text, not nesting.
    assert parse_json(json.dumps({"s": "[" * 1000})) == {"s": "[" * 1000}


def test_too_deep_names_the_path_to_the_first_level_too_many() -> None:
    text = '{"metadata": {"a": [0, 1, 2, {"b": ' + "[" * 70 + "]" * 70 + "}]}}"
    refused = _refused(text, max_depth=5)
    assert refused.loc == ("body", "metadata", "a", 3, "b", 0)
    assert str(refused) == "body.metadata.a[3].b[0]: nested deeper than 5 levels"
    odd = _refused('{"a b\\"": [0, "x,]", {"k": [[[[[[[]]]]]]]}]}', max_depth=4, root="metadata")
    assert str(odd) == 'metadata["a b\\""][2].k[0]: nested deeper than 4 levels'


@pytest.mark.parametrize("levels", [DEFAULT_MAX_DEPTH + 1, 1_000, 100_000])
def test_any_depth_past_the_limit_is_the_same_clean_refusal(levels: int) -> None:
    for text in ("[" * levels + "]" * levels, '{"a":' * levels + "1" + "}" * levels, "[" * levels):
        refused = _refused(text)
        assert refused.reason == f"nested deeper than {DEFAULT_MAX_DEPTH} levels"
        assert len(refused.loc) == DEFAULT_MAX_DEPTH + 1


@pytest.mark.parametrize(
    ("text", "loc", "reason"),
    [
        ('{"input": {"x": NaN}}', ("body", "input", "x"), "NaN is not a number JSON allows"),
        ('{"a": [1, Infinity]}', ("body", "a", 1), "Infinity is not a number JSON allows"),
        ("[-Infinity]", ("body", 0), "-Infinity is not a number JSON allows"),
        ('{"v": 1e400}', ("body", "v"), "1e400 is too large for a number (it would be Infinity)"),
        ('{"n": ' + "9" * 5000 + "}", ("body", "n"), "an integer of 5000 digits is longer than this server reads"),
    ],
)
def test_numbers_json_does_not_allow_are_refused_where_found(text: str, loc: tuple[object, ...], reason: str) -> None:
    refused = _refused(text)
    assert (refused.loc, refused.reason) == (loc, reason)


def test_bytes_are_decoded_as_json_loads_decodes_them() -> None:
    """A UTF-16 body is what ``json.loads`` (and so Starlette's ``request.json()``) reads: it is checked too."""
    assert _refused("[NaN]".encode("utf-16")).loc == ("body", 0)
    assert _refused(("[" * 80 + "]" * 80).encode("utf-32-be")).reason == "nested deeper than 64 levels"


def test_text_that_is_no_json_is_a_value_error_but_not_a_refusal() -> None:
    for text in ("not json", '{"a": }', '"unterminated'):
        with pytest.raises(ValueError) as caught:
            parse_json(text)
        assert not isinstance(caught.value, JsonRefused)


def test_an_unterminated_string_costs_one_pass() -> None:
    """Every escaped quote would restart a naive string pattern (quadratic): the scan is linear."""
    with pytest.raises(ValueError):
        parse_json('"\\' * 200_000 + "[" * 100)


def test_a_parsed_value_is_checked_without_recursion() -> None:
    deep: list[object] = []
    cur = deep
    for _ in range(100_000):
        nxt: list[object] = []
        cur.append(nxt)
        cur = nxt
    with pytest.raises(JsonRefused) as caught:
        check_json(deep, root="input")
    assert caught.value.reason == "nested deeper than 64 levels"
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(JsonRefused):
        check_json(cyclic)
    with pytest.raises(JsonRefused) as nan:
        check_json({"a": [1.0, (2, math.nan)]}, root="metadata")
    assert str(nan.value) == "metadata.a[1][1]: NaN is not a number JSON allows"
    check_json({"a": [1.0, 2, "x", None, True, {"b": -0.0}]})


def test_the_refusal_pickles_and_is_a_value_error() -> None:
    refused = JsonRefused(("body", "a", 3), "nested deeper than 64 levels")
    again = pickle.loads(pickle.dumps(refused))
    assert isinstance(again, JsonRefused) and isinstance(again, ValueError)
    assert (again.loc, again.reason, str(again)) == (refused.loc, refused.reason, str(refused))
    assert dotted(("body", "x" * 50, 0, "a b")) == "body." + "x" * 40 + '...[0]["a b"]'


def test_a_server_cannot_be_set_to_accept_what_its_stores_could_not_read_back() -> None:
    from repertory.http.limits import ServerLimits

    assert ServerLimits(max_json_depth=MAX_SAFE_DEPTH).max_json_depth == MAX_SAFE_DEPTH
    with pytest.raises(ValueError, match="max_json_depth must be <= 128"):
        ServerLimits(max_json_depth=MAX_SAFE_DEPTH + 1)
