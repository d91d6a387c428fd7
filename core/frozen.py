"""``attrs.frozen`` with a faster ``__init__``.

attrs' frozen classes assign each field through ``object.__setattr__``; setting the slot
descriptors directly does the same in half the time. That matters for the values built on
every heartbeat (Respond, SetTimer) and every replayed event. Behaviour (repr, eq, hash,
immutability, defaults, kw_only, init names) stays attrs'.

Type checkers see ``frozen`` as ``attrs.frozen`` itself (mypy's attrs plugin, and the
``dataclass_transform`` of attrs' stubs for the others): the classes it makes are attrs classes
with attrs' ``__init__`` signature, which the faster one keeps.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs

if TYPE_CHECKING:
    from attrs import AttrsInstance

_T = TypeVar("_T", bound="AttrsInstance")
# (field names, a function returning an instance's field values as a tuple)
Reader = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]


def _fast_frozen(maybe_cls: type | None = None, *, kw_only: bool = False) -> Any:
    def wrap(cls: type) -> type:
        cls = attrs.frozen(cls, kw_only=kw_only)
        fields = attrs.fields(cls)
        # attrs' stubs type Factory as the function returning the value it makes; it is a class
        if any(f.validator or f.converter or not f.init
               or isinstance(f.default, attrs.Factory)  # type: ignore[arg-type]
               for f in fields):
            return cls  # keep attrs' own __init__ where it does more than assign
        namespace: dict[str, Any] = {}
        params, body = [], []
        for f in fields:
            # the parameter is the field's alias: a private field ``_a`` is ``a=`` to attrs
            namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
            if f.default is attrs.NOTHING:
                params.append(f.alias)
            else:
                namespace[f"_default_{f.name}"] = f.default
                params.append(f"{f.alias}=_default_{f.name}")
            body.append(f"    _set_{f.name}(self, {f.alias})")
        star = "*, " if kw_only or any(f.kw_only for f in fields) else ""
        source = f"def __init__(self, {star}{', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
        exec(source, namespace)
        namespace["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
        setattr(cls, "__init__", namespace["__init__"])  # (mypy refuses ``cls.__init__ = ...``)
        return cls

    return wrap if maybe_cls is None else wrap(maybe_cls)


if TYPE_CHECKING:
    from attrs import frozen
else:
    frozen = _fast_frozen


_READERS: dict[type, Reader | None] = {}


def field_reader(cls: type) -> Reader | None:
    """(field names, a function returning an instance's field values as a tuple) for an attrs
    class whose ``__init__`` takes its fields by name; None for one whose init names differ
    (or with fewer than two fields, where ``attrgetter`` returns no tuple)."""
    try:
        return _READERS[cls]
    except KeyError:
        pass
    fields = attrs.fields(cls)
    reader: Reader | None = None
    if len(fields) >= 2 and all(f.init and f.alias == f.name for f in fields):
        names = tuple(f.name for f in fields)
        reader = (names, operator.attrgetter(*names))
    _READERS[cls] = reader
    return reader


def field_copier(cls: type) -> Callable[[Any, Any], None]:
    """A function ``copy(target, source)`` setting each of ``cls``'s fields on ``target`` (an
    object with the same attribute names, e.g. a mutable twin) from ``source``: generated, a
    line per field, ten times faster than a loop over the fields."""
    body = "".join(f"    target.{f.name} = source.{f.name}\n" for f in attrs.fields(cls)) or "    pass\n"
    namespace: dict[str, Any] = {}
    exec(f"def copy(target, source):\n{body}", namespace)
    return namespace["copy"]


# class -> (its field values' getter, field name -> position) for classes whose __init__ takes
# every field by position; None for the others
_POSITIONS: dict[type, tuple[Callable[[Any], tuple[Any, ...]], dict[str, int]] | None] = {}


def _positions(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], dict[str, int]] | None:
    reader = field_reader(cls)
    found = None
    if reader is not None and not any(f.kw_only for f in attrs.fields(cls)):
        names, values = reader
        found = (values, {name: i for i, name in enumerate(names)})
    _POSITIONS[cls] = found
    return found


def evolve(inst: _T, **changes: Any) -> _T:
    """``attrs.evolve`` for the values built per event: a copy of ``inst`` with ``changes``,
    made through the class's ``__init__`` as attrs does, with the fields read in one call and
    passed by position where the class allows it (half the cost of passing them by name)."""
    cls = type(inst)
    try:
        positions = _POSITIONS[cls]
    except KeyError:
        positions = _positions(cls)
    if positions is not None:
        values, index = positions
        args = list(values(inst))
        for name, value in changes.items():
            try:
                args[index[name]] = value
            except KeyError:
                raise TypeError(f"{cls.__name__} has no field {name!r}") from None
        return cls(*args)
    reader = field_reader(cls)
    if reader is None:
        # (generic here: mypy's attrs plugin checks the changes against a known class only)
        return attrs.evolve(cast(Any, inst), **changes)
    names, values = reader
    kwargs = dict(zip(names, values(inst)))
    kwargs.update(changes)
    return cls(**kwargs)
