"""TLA+ values in Python: parsing what TLC prints, and writing values TLC can read.

A TLA+ value becomes:

* a string, an integer or a boolean as itself;
* a model value as ``MV(name)``, except the model value ``None``, which is Python's ``None``;
* a sequence (tuple) as a tuple;
* a set as a frozenset;
* a record or any other function as ``F`` (a hashable dict). A function whose domain is
  ``1..n`` (or empty) is a sequence in TLA+, so it becomes a tuple.

``parse`` reads TLC's printed form (state dumps, error traces, ``PrintT``); ``fmt`` writes a
value as TLA+ source (generated trace modules). Both sides of every comparison between the
spec and the core go through these forms.
"""

from __future__ import annotations

import re
from typing import Any, Callable


class OutOfModel(Exception):
    """The core did something the spec does not model (several groups, foreign writes, ...)."""


class MV:
    """A TLC model value (an uninterpreted constant such as ``m1``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MV) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("MV", self.name))

    def __repr__(self) -> str:
        return self.name

    def __lt__(self, other: "MV") -> bool:
        return self.name < other.name


class F(dict):
    """A TLA+ function or record: an immutable, hashable dict."""

    __slots__ = ("_hash",)

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            h = self._hash = hash(frozenset(self.items()))
            return h

    def _immutable(self, *args, **kwargs):
        raise TypeError("F is immutable")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable  # type: ignore

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def set(self, **changes) -> "F":
        values = dict(self)
        values.update(changes)
        return F(values)


def fn(mapping) -> Any:
    """A function value: a tuple when the domain is 1..n (or empty), else an F."""
    mapping = dict(mapping)
    if not mapping:
        return ()
    n = len(mapping)
    if all(type(k) is int for k in mapping) and set(mapping) == set(range(1, n + 1)):
        return tuple(mapping[i] for i in range(1, n + 1))
    return F(mapping)


def rec(**fields) -> F:
    return F(fields)


# ----------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<int>-?\d+)
    | (?P<sym><<|>>|\|->|:>|@@|[\[\]{}(),])
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    )""", re.VERBOSE | re.DOTALL)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def tokens(text: str) -> list:
    out = []
    pos = 0
    match = _TOKEN.match
    while True:
        m = match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                raise ValueError(f"cannot read TLA+ value at {text[pos:pos + 40]!r}")
            return out
        pos = m.end()
        kind = m.lastgroup
        if kind == "str":
            out.append(("s", _unescape(m.group("str")[1:-1])))
        elif kind == "int":
            out.append(("v", int(m.group("int"))))
        elif kind == "sym":
            out.append(("p", m.group("sym")))
        else:
            word = m.group("id")
            if word == "TRUE":
                out.append(("v", True))
            elif word == "FALSE":
                out.append(("v", False))
            elif word == "None":
                out.append(("v", None))
            else:
                out.append(("i", word))


class _Parser:
    def __init__(self, toks: list) -> None:
        self.t = toks
        self.i = 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self, sym: str) -> None:
        kind, val = self.peek()
        if kind != "p" or val != sym:
            raise ValueError(f"expected {sym!r}, found {val!r}")
        self.i += 1

    def value(self) -> Any:
        kind, val = self.peek()
        self.i += 1
        if kind in ("s", "v"):
            return val
        if kind == "i":
            return MV(val)
        if val == "<<":
            return tuple(self.values(">>"))
        if val == "{":
            return frozenset(self.values("}"))
        if val == "[":
            return F(self.pairs(self.name, "|->", ",", "]"))
        if val == "(":
            return fn(self.pairs(self.value, ":>", "@@", ")"))
        raise ValueError(f"unexpected {val!r}")

    def name(self) -> Any:
        _kind, val = self.peek()
        self.i += 1
        return val

    def values(self, close: str) -> list:
        """Values separated by commas, up to ``close`` (possibly none)."""
        items = []
        if self.peek() != ("p", close):
            items.append(self.value())
            while self.peek() == ("p", ","):
                self.i += 1
                items.append(self.value())
        self.take(close)
        return items

    def pairs(self, key: Callable[[], Any], arrow: str, sep: str, close: str) -> dict:
        """``key() arrow value`` pairs separated by ``sep``, up to ``close`` (at least one)."""
        out = {}
        while True:
            k = key()
            self.take(arrow)
            out[k] = self.value()
            if self.peek() == ("p", sep):
                self.i += 1
                continue
            self.take(close)
            return out


def parse(text: str) -> Any:
    p = _Parser(tokens(text))
    value = p.value()
    if p.i != len(p.t):
        raise ValueError(f"trailing input after a TLA+ value: {p.t[p.i:p.i + 3]}")
    return value


# ----------------------------------------------------------------------------- writing

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"TRUE", "FALSE", "None", "IF", "THEN", "ELSE", "LET", "IN", "CASE", "OTHER", "CHOOSE",
             "EXCEPT", "DOMAIN", "SUBSET", "UNION", "ENABLED", "UNCHANGED"}


def tla_string(s: str) -> str:
    if any(ord(c) < 32 or ord(c) > 126 for c in s):
        raise ValueError(f"not a printable ASCII string: {s!r}")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fmt(value: Any) -> str:
    """TLA+ source text for a value (model values by name)."""
    if value is None:
        return "None"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return tla_string(value)
    if isinstance(value, MV):
        return value.name
    if isinstance(value, tuple):
        return "<<" + ", ".join(fmt(v) for v in value) + ">>"
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(fmt(v) for v in value)) + "}"
    if isinstance(value, dict):
        if not value:
            return "<<>>"
        if all(isinstance(k, str) and _IDENT.match(k) and k not in _RESERVED for k in value):
            return "[" + ", ".join(f"{k} |-> {fmt(v)}" for k, v in value.items()) + "]"
        return "(" + " @@ ".join(f"{fmt(k)} :> {fmt(v)}" for k, v in value.items()) + ")"
    raise TypeError(f"no TLA+ form for {type(value).__name__}: {value!r}")


def show(value: Any, limit: int = 400) -> str:
    """A short human-readable form for messages."""
    try:
        text = fmt(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " ..."
