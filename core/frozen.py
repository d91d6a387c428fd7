"""``attrs.frozen`` with a faster ``__init__``.

attrs' frozen classes assign each field through ``object.__setattr__``; setting the slot
descriptors directly does the same in half the time. That matters for the values built on
every heartbeat (Respond, SetTimer) and every replayed event. Behaviour (repr, eq, hash,
immutability, defaults, kw_only) stays attrs'.
"""

from __future__ import annotations

import operator

import attrs


def frozen(maybe_cls=None, *, kw_only: bool = False):
    def wrap(cls):
        cls = attrs.frozen(cls, kw_only=kw_only)
        fields = attrs.fields(cls)
        if any(f.validator or f.converter or isinstance(f.default, attrs.Factory) for f in fields):
            return cls  # keep attrs' own __init__ where it does more than assign
        namespace, params, body = {}, [], []
        for f in fields:
            namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
            if f.default is attrs.NOTHING:
                params.append(f.name)
            else:
                namespace[f"_default_{f.name}"] = f.default
                params.append(f"{f.name}=_default_{f.name}")
            body.append(f"    _set_{f.name}(self, {f.name})")
        star = "*, " if kw_only or any(f.kw_only for f in fields) else ""
        source = f"def __init__(self, {star}{', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
        exec(source, namespace)
        namespace["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = namespace["__init__"]
        return cls

    return wrap if maybe_cls is None else wrap(maybe_cls)


_READERS: dict[type, tuple | None] = {}


def field_reader(cls) -> tuple | None:
    """(field names, a function returning an instance's field values as a tuple) for an attrs
    class whose ``__init__`` takes its fields by name; None for one whose init names differ
    (or with fewer than two fields, where ``attrgetter`` returns no tuple)."""
    try:
        return _READERS[cls]
    except KeyError:
        pass
    fields = attrs.fields(cls)
    reader = None
    if len(fields) >= 2 and all(f.init and f.alias == f.name for f in fields):
        names = tuple(f.name for f in fields)
        reader = (names, operator.attrgetter(*names))
    _READERS[cls] = reader
    return reader


def field_copier(cls):
    """A function ``copy(target, source)`` setting each of ``cls``'s fields on ``target`` (an
    object with the same attribute names, e.g. a mutable twin) from ``source``: generated, a
    line per field, ten times faster than a loop over the fields."""
    body = "".join(f"    target.{f.name} = source.{f.name}\n" for f in attrs.fields(cls)) or "    pass\n"
    namespace: dict = {}
    exec(f"def copy(target, source):\n{body}", namespace)
    return namespace["copy"]


# class -> (its field values' getter, field name -> position) for classes whose __init__ takes
# every field by position; None for the others
_POSITIONS: dict[type, tuple | None] = {}


def _positions(cls) -> tuple | None:
    reader = field_reader(cls)
    found = None
    if reader is not None and not any(f.kw_only for f in attrs.fields(cls)):
        names, values = reader
        found = (values, {name: i for i, name in enumerate(names)})
    _POSITIONS[cls] = found
    return found


def evolve(inst, **changes):
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
        return attrs.evolve(inst, **changes)
    names, values = reader
    kwargs = dict(zip(names, values(inst)))
    kwargs.update(changes)
    return cls(**kwargs)
