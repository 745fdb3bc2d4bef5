"""Records the engine builds (or copies) from values it made itself, without validating them again.

Validation is for input: what a user, a tool, a model server or the store hands over. A history
revision the step loop mints from its own ids, the event it numbers, the tool message it wraps
around results that were already validated: running pydantic over those again costs a few
microseconds each and, on every step of thousands of sessions, a large part of a turn.

``trusted`` builds such a record straight from its fields (defaults filled in, names checked,
values not). Every record it builds shares one ``model_fields_set`` per class holding every field
name: a set per record was a tracked object each for the cyclic collector to scan, about a
quarter of what a resident session holds, for a set nobody here reads. It is safe to share because
it already names every field: assigning one adds nothing, and ``model_copy`` copies the set before
it changes it. ``copied`` is ``model_copy()`` without its per-copy work, sharing such a set too.

Only for models without private attributes or extra fields (``TypeError`` otherwise), whose
validators, if any, have nothing to say about values the engine made.

Records that were validated (read from the store) keep their validation; ``share_fields_sets``
then lets the frozen ones among them share one set per distinct content instead of one each: a
frozen record's set is never changed after it is built (assignment is refused, ``model_copy``
copies it first), so equal sets can be one object. A loaded conversation is mostly such records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["copied", "share_fields_sets", "trusted"]

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__


class _Plan:
    """What building one model class needs: its field names, the shared set, the optional fields."""

    __slots__ = ("count", "fields_set", "names", "optional", "order")

    def __init__(self, cls: type[BaseModel]) -> None:
        if cls.__private_attributes__:
            raise TypeError(f"{cls.__name__} has private attributes: build it with its constructor")
        if cls.model_config.get("extra") == "allow":
            raise TypeError(f"{cls.__name__} allows extra fields: build it with its constructor")
        fields: dict[str, FieldInfo] = cls.__pydantic_fields__
        self.names = frozenset(fields)
        self.order = tuple(fields)  # pydantic writes JSON in ``__dict__`` order: the declared one
        self.count = len(fields)
        self.fields_set: set[str] = set(fields)
        self.optional = tuple((name, info) for name, info in fields.items() if not info.is_required())


_PLANS: dict[type[BaseModel], _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    return plan


def trusted(cls: type[M], /, **fields: Any) -> M:
    """An instance of ``cls`` holding ``fields`` as given (defaults for the rest), not validated.

    A missing required field or an unknown name is a ``TypeError``: the names are the engine's own
    code, so a wrong one is a bug to hear about at once, not a record to write.
    """
    plan = _PLANS.get(cls) or _plan(cls)
    if len(fields) != plan.count:
        for name, info in plan.optional:
            if name not in fields:
                fields[name] = info.get_default(call_default_factory=True, validated_data=fields)
    try:
        values = {name: fields[name] for name in plan.order}
    except KeyError:
        values = {}
    if len(values) != len(fields):
        unknown = sorted(fields.keys() - plan.names)
        missing = sorted(plan.names - fields.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing required fields {missing}")
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", plan.fields_set)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def copied(model: M, /, **changes: Any) -> M:
    """A shallow copy of ``model`` with ``changes`` put in, not validated; ``model_fields_set`` as it was.

    The set is shared when it names every field (nothing can add to it), copied otherwise.
    """
    cls = type(model)
    obj = _new(cls)
    values = model.__dict__.copy()
    if changes:
        values.update(changes)
    _set(obj, "__dict__", values)
    fields_set = model.__pydantic_fields_set__
    if len(fields_set) != len(cls.__pydantic_fields__) or model.__pydantic_extra__ is not None:
        fields_set = set(fields_set)
    _set(obj, "__pydantic_fields_set__", fields_set)
    extra = model.__pydantic_extra__
    _set(obj, "__pydantic_extra__", None if extra is None else dict(extra))
    private = model.__pydantic_private__
    _set(obj, "__pydantic_private__", None if private is None else dict(private))
    return obj


_SHARED: dict[tuple[type[BaseModel], frozenset[str]], set[str]] = {}
_MISSING: Any = object()
# Per class: the set naming every field, or ``None`` for a class whose records keep their own (not
# frozen) or whose set may name extra fields (a set as long as the fields is then not all of them).
_FULL: dict[type[BaseModel], set[str] | None] = {}


def _full(cls: type[BaseModel]) -> set[str] | None:
    full = None
    if cls.model_config.get("frozen"):
        full = set(cls.__pydantic_fields__)
        if cls.model_config.get("extra") == "allow":
            full = set()  # shared by content only, never by length
    _FULL[cls] = full
    return full


def share_fields_sets(records: Iterable[BaseModel]) -> None:
    """Give each frozen record in ``records`` the shared ``model_fields_set`` equal to its own.

    For records just validated and not yet handed to anyone; records that are not frozen are left
    alone (their set grows when a field is assigned). A set that names every field (what a store's
    row gives a revision or an entry) is recognised by its length, without building a key for it:
    a loaded lineage is thousands of those.
    """
    for record in records:
        cls = type(record)
        full = _FULL.get(cls, _MISSING)
        if full is _MISSING:
            full = _full(cls)
        if full is None:
            continue
        own = record.__pydantic_fields_set__
        if own is full:
            continue
        if full and len(own) == len(full):
            _set(record, "__pydantic_fields_set__", full)
            continue
        key = (cls, frozenset(own))
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = set(own)
        if shared is not own:
            _set(record, "__pydantic_fields_set__", shared)
