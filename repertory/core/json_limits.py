"""Bounded JSON: no deeper than a limit, only finite numbers; checked before anything keeps a value.

Two kinds of JSON value must never get past a front door. One nested deeper than the stores can
read back: pydantic writes a record nested about 254 levels deep but parses JSON text only to
about 200, so a value in between was stored and then failed every read (a listing, a boot). And
``NaN``/``Infinity``: not JSON (RFC 8259), yet Python's ``json`` reads them, so one got into a
record and the server failed afterwards, answering with it. Every entry point (the HTTP server's
middleware, the CLI's ``--json`` options, a Python caller's value) asks this module, so they all
refuse the same values with the same words: ``JsonRefused``, whose message names where the value
is (``body.metadata.a[3].b: nested deeper than 64 levels``).

Depth is measured without recursion: text is scanned by regular expressions and an explicit stack,
a parsed value is walked with one, so a value nested 100,000 levels gets the same clean refusal as
one nested 65, never a ``RecursionError``. The limit is a parameter; ``DEFAULT_MAX_DEPTH`` is the
default every front door starts from (the HTTP server's ``ServerLimits.max_json_depth``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from pydantic import JsonValue

__all__ = ["DEFAULT_MAX_DEPTH", "MAX_SAFE_DEPTH", "JsonRefused", "check_json", "dotted", "parse_json"]

DEFAULT_MAX_DEPTH = 64
"""The deepest nesting of arrays and objects accepted by default: far below what a store reads back."""
MAX_SAFE_DEPTH = 128
"""The deepest limit a server may be configured with: a value sits a few levels down in its record,
and pydantic reads a record's JSON only to about 200 levels (``repertory.storage.readback``)."""

Loc = tuple[str | int, ...]

# A JSON string, unrolled so that a long one costs one pass without backtracking; an unterminated
# one runs to the end of the text (which is then no JSON), so no match ever fails and rescans.
_STRING = r'"[^"\\]*(?:\\[\s\S]?[^"\\]*)*(?:"|\Z)'
_STRINGS = re.compile(_STRING)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# The pieces the scan that names a path walks: a bracket, or a run of everything else (scalars,
# commas, colons, strings) in one match, so flat content costs no Python step per value.
_PIECES = re.compile(r"[\[\]{}]|(?:[^\"\[\]{}]+|" + _STRING + r")+")
# A number that may not fit: a float's exponent of three digits or a mantissa of 309 (1.8e308 is
# the largest double), or an integer near Python's digit limit for reading one.
_BIG_NUMBER = re.compile(r"\d{309}|[eE]\+?0*[1-9]\d\d")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KEY_SHOWN = 40
_NON_FINITE = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


class JsonRefused(ValueError):
    """A JSON value refused for its shape: nested too deep, or holding a number JSON does not allow.

    ``loc`` is where, as a path from the root's name (``("body", "metadata", "a", 3)``); ``reason``
    is what, without the path (``nested deeper than 64 levels``). The message is both, which is
    what a 422 answer or an ``error:`` line shows. A ``ValueError``, so a pydantic validator that
    raises it becomes a validation error, and code that catches bad input already catches it.
    """

    def __init__(self, loc: Sequence[str | int], reason: str) -> None:
        self.loc: Loc = tuple(loc)
        self.reason = reason
        super().__init__(f"{dotted(self.loc)}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (JsonRefused, (self.loc, self.reason))


def dotted(loc: Sequence[str | int]) -> str:
    """A path as a reader writes it: ``body.metadata.a[3].b``, an odd key quoted (``["a b"]``), a long one cut.

    The first part is the root's name, shown as given (``--json[0]``).
    """
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        shown = part if len(part) <= _KEY_SHOWN else part[:_KEY_SHOWN] + "..."
        if i == 0:
            out += part  # the root's name (``body``, ``--json``) as its caller gave it
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{shown}"
        else:
            out += f"[{json.dumps(shown)}]"
    return out


def _too_deep(max_depth: int) -> str:
    return f"nested deeper than {max_depth} levels"


def check_json(value: object, *, max_depth: int = DEFAULT_MAX_DEPTH, root: str = "body") -> None:
    """Refuse a parsed value (a Python caller's) nested deeper than ``max_depth`` or holding a non-finite float.

    ``dict``, ``list`` and ``tuple`` count as levels; the walk stops at the first problem in
    document order and never goes past ``max_depth``, so a cyclic or absurdly deep value costs
    at most the levels allowed. Raises ``JsonRefused``; returns ``None`` for a value that passes.
    """
    found = _first_problem(value, max_depth, (root,))
    if found is not None:
        raise JsonRefused(*found)


def parse_json(text: str | bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, root: str = "body") -> JsonValue:
    """Parse JSON text, refusing what ``check_json`` refuses; the path in the error starts at ``root``.

    Raises ``JsonRefused`` for a value too deep or a non-finite number (``NaN``, ``Infinity``,
    ``-Infinity``, a literal such as ``1e400`` that only a float's infinity can hold, or an
    integer longer than Python reads), and ``ValueError`` (``json.JSONDecodeError``, or a
    ``UnicodeDecodeError`` for bytes) for text that is not JSON. Bytes are decoded as
    ``json.loads`` decodes them (UTF-8, -16 or -32 by their first bytes), so a caller that parses
    the same bytes with ``json.loads`` never reads a value this check did not see.
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    skeleton = _STRINGS.sub("", text)
    if _deepest(skeleton) > max_depth:
        raise JsonRefused(_deep_loc(text, max_depth, root) or (root,), _too_deep(max_depth))
    odd: list[_Odd] = []
    hooks: dict[str, Any] = {
        "parse_constant": lambda name: _odd(odd, f"{_NON_FINITE.get(name, name)} is not a number JSON allows")
    }
    if _BIG_NUMBER.search(skeleton):  # rare: only then is each number looked at in Python
        hooks["parse_float"] = lambda literal: _finite(odd, literal)
        hooks["parse_int"] = lambda literal: _integer(odd, literal)
    value = json.loads(text, **hooks)
    if odd:
        found = _first_problem(value, max_depth, (root,))
        if found is not None:
            raise JsonRefused(*found)
    return value  # type: ignore[no-any-return]


class _Odd:
    """Stands in the parsed value for a number refused while parsing, until the walk finds its path."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _odd(found: list[_Odd], reason: str) -> _Odd:
    odd = _Odd(reason)
    found.append(odd)
    return odd


def _finite(found: list[_Odd], literal: str) -> float | _Odd:
    value = float(literal)
    if math.isfinite(value):
        return value
    return _odd(found, f"{literal[:_KEY_SHOWN]} is too large for a number (it would be Infinity)")


def _integer(found: list[_Odd], literal: str) -> int | _Odd:
    try:
        return int(literal)
    except ValueError:  # longer than sys.get_int_max_str_digits()
        return _odd(found, f"an integer of {len(literal)} digits is longer than this server reads")


def _first_problem(value: object, max_depth: int, root: Loc) -> tuple[Loc, str] | None:
    """The first refused place in document order (a depth-first walk with an explicit stack), or ``None``."""
    stack: list[tuple[object, Loc, int]] = [(value, root, 1)]
    while stack:
        item, loc, depth = stack.pop()
        if isinstance(item, _Odd):
            return loc, item.reason
        if isinstance(item, float):
            if not math.isfinite(item):
                name = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
                return loc, f"{name} is not a number JSON allows"
            continue
        children: list[tuple[str | int, object]]
        if isinstance(item, dict):
            children = [(str(k), v) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            children = list(enumerate(item))
        else:
            continue
        if depth > max_depth:
            return loc, _too_deep(max_depth)
        for key, child in reversed(children):
            if isinstance(child, dict | list | tuple | float | _Odd):
                stack.append((child, (*loc, key), depth + 1))
    return None


def _deepest(skeleton: str) -> int:
    """How deep the brackets of JSON text with its strings taken out nest (C-speed passes, no recursion)."""
    brackets = _NOT_BRACKETS.sub("", skeleton)
    if len(brackets) <= 1:
        return len(brackets)
    return max(accumulate(map(_STEP.__getitem__, brackets.encode("ascii"))))


def _deep_loc(text: str, max_depth: int, root: str) -> Loc | None:
    """Where the first container below level ``max_depth`` opens, as a path, or ``None`` if none does.

    One frame per open container: an array's holds the index of the element being read (the
    commas of the runs between its brackets), an object's the key of the member being read (the
    string before the colon that precedes the bracket). Between two brackets is one run.
    """
    frames: list[list[Any]] = []  # [is_object, key or index]
    run = ""  # the text since the last bracket
    for match in _PIECES.finditer(text):
        piece = match.group()
        if piece == "[" or piece == "{":
            if frames and frames[-1][0]:
                frames[-1][1] = _last_key(run)
            if len(frames) >= max_depth:
                return (root, *(frame[1] for frame in frames))
            frames.append([piece == "{", "" if piece == "{" else 0])
            run = ""
        elif piece == "]" or piece == "}":
            if frames:
                frames.pop()
            run = ""
        else:
            run = piece
            if frames and not frames[-1][0]:
                frames[-1][1] += _STRINGS.sub("", piece).count(",")
    return None


def _last_key(run: str) -> str:
    """The member key a run ends with (``... "key" :``), decoded; ``"?"`` when it does not end with one."""
    body = run.rstrip()
    if not body.endswith(":"):
        return "?"
    body = body[:-1].rstrip()
    if not body.endswith('"'):
        return "?"
    i = len(body) - 2
    while i >= 0:
        if body[i] == '"':
            slashes = 0
            while i - slashes - 1 >= 0 and body[i - slashes - 1] == "\\":
                slashes += 1
            if slashes % 2 == 0:
                try:
                    key = json.loads(body[i:])
                except ValueError:
                    return "?"
                return key if isinstance(key, str) else "?"
        i -= 1
    return "?"
