"""The ``groupcoord`` command's parser and the value types its commands share.

One rule for every refusal: exit status 2 and one line on stderr,
``groupcoord <command>: error: <what>``, with no usage block and no traceback, before
anything is written, connected to or started. ``Parser`` applies it to argparse's own errors
(an unknown flag is reported by the command it was given to, not by ``groupcoord``); the
commands use ``fail`` for what they find after parsing (a missing file, a port in use, a
package that is not installed).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

# The states ListGroups filters on (classic and consumer groups), as Kafka spells them.
GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", "Assigning",
                "Reconciling")


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def fail(prog: str, message: object) -> int:
    """Print the refusal line for ``prog`` (``groupcoord <command>``) and return 2."""
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    return 2


class Parser(argparse.ArgumentParser):
    """argparse with the refusal rule. ``parse_args`` sets ``prog`` on the namespace: the
    chosen command's name, e.g. ``groupcoord tla mutants``, for the commands' own errors."""

    def error(self, message: str):
        sub = self._subcommands()
        if sub is not None:  # say "command", not the attribute the choice is kept in
            unknown = re.match(rf"argument {re.escape(sub.dest)}: invalid choice: (.+?) \(choose from", message)
            if unknown:
                message = f"unknown command {unknown.group(1)}: one of {', '.join(sub.choices)}"
            elif message.startswith("the following arguments are required") \
                    and sub.dest in message.split(":", 1)[1].replace(" ", "").split(","):
                message = f"missing a command: one of {', '.join(sub.choices)}"
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        leaf = self.chosen(parsed)
        if extra:
            leaf.error(f"unrecognized arguments: {' '.join(extra)}")
        parsed.prog = leaf.prog
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the command ``parsed`` names (this one when it has no commands)."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = parser._subcommands() if isinstance(parser, Parser) else None
            name = getattr(parsed, sub.dest, None) if sub is not None else None
            if name not in (sub.choices if sub is not None else {}):
                return parser
            parser = sub.choices[name]

    def _subcommands(self):
        return next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)


# ------------------------------------------------------------------ output paths


def output_problem(flag: str, path: str, kind: str = "dir") -> str | None:
    """Why ``path`` (given with ``flag``) cannot be written, or None; looked at, never created.
    ``kind`` is what the command writes there: ``dir`` (a directory, created with its missing
    parents: what is there must be a directory, the nearest existing ancestor a writable
    directory) or ``file`` (a file created or replaced, or appended to, in a directory that
    must exist: not a directory itself)."""
    target = Path(path).absolute()
    if kind == "file":
        if target.is_dir():
            return f"{flag} {path}: is a directory"
        if target.exists():
            return None if os.access(target, os.W_OK) else f"{flag} {path}: not writable"
        if not target.parent.exists():
            return f"{flag} {path}: no such directory: {target.parent}"
        existing = target.parent
    else:
        existing = next((p for p in (target, *target.parents) if p.exists()), None)
        if existing is None:
            return None
        if existing == target and not existing.is_dir():
            return f"{flag} {path}: exists and is not a directory"
    if not existing.is_dir():
        return f"{flag} {path}: {existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{flag} {path}: {existing} is not writable"
    return None


# ------------------------------------------------------------------ value types


def number(kind, minimum, what: str, maximum=None):
    """An argparse type: a ``kind`` (int or float) from ``minimum`` (to ``maximum``), finite,
    refused with ``expected <what>, got '<text>'``."""

    def parse(text: str):
        try:
            x = kind(text)
        except ValueError:
            x = None
        if x is None or not (math.isfinite(x) and x >= minimum and (maximum is None or x <= maximum)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return x

    return parse


port = number(int, 0, "a port number from 0 to 65535", 65535)
seconds = number(float, 0.001, "seconds, at least 0.001")


def host(text: str) -> str:
    if not text.strip() or any(c.isspace() for c in text) or "/" in text:
        raise argparse.ArgumentTypeError(f"expected a host name or address, got {text!r}")
    return text


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 address in brackets: ``[::1]:9092``)."""
    h, sep, p = text.strip().rpartition(":")
    h = h[1:-1] if h.startswith("[") and h.endswith("]") else h
    try:
        n = int(p)
    except ValueError:
        n = -1
    if not sep or not h or any(c.isspace() for c in h) or not 0 < n <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return h, n


def bootstrap(text: str) -> str:
    """``HOST:PORT[,HOST:PORT...]``, checked and passed on as given."""
    if not [host_port(part) for part in text.split(",") if part.strip()]:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
    return text


def topic_partitions(text: str) -> str:
    """``TOPIC`` or ``TOPIC:P,P,...`` (partitions numbered from 0), passed on as given."""
    name, sep, parts = text.partition(":")
    numbers = [p.strip() for p in parts.split(",")] if sep else []
    if not name or (sep and (not numbers or not all(p.isdigit() for p in numbers))):
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:PARTITION[,PARTITION...], got {text!r}")
    return text


def group_state(text: str) -> str:
    """A group state, any case, as Kafka spells it."""
    for state in GROUP_STATES:
        if state.lower() == text.strip().lower():
            return state
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(GROUP_STATES)}, got {text!r}")


GROUP_TYPES = ("classic", "consumer", "share", "streams")


def group_type(text: str) -> str:
    """A group type (ListGroups v5's types filter), any case, as Kafka spells it."""
    if text.strip().lower() in GROUP_TYPES:
        return text.strip().lower()
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(GROUP_TYPES)}, got {text!r}")


def one_of(known, what: str):
    """An argparse type: a comma-separated subset of ``known`` (at least one), as a tuple."""

    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
        unknown = [x for x in chosen if x not in known]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(map(repr, unknown)) or repr(text)}; "
                                             f"choose from {', '.join(known)}")
        return chosen

    return parse
