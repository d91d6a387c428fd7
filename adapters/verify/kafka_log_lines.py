"""The statements of Kafka's logs about classic groups, as each version words them.

Reading a real log means knowing, per version of the coordinator's code, what each statement
says and *where it is logged relative to the change it reports* (spec/verify.md, "Kafka's log
statements by version"). Each pattern below names the families of Kafka's code that log it
that way; a source's family is what all its lines agree on. The checker (kafka_log.py) relies
only on what every family still possible for a source guarantees.

A line is read as: whatever a container or log shipper put in front (kept aside), Kafka's own
``[timestamp] LEVEL [logger context]`` (or a client's layout), the message, and Kafka's logger
name in parentheses at the end, which is dropped. Only the message is matched."""

from __future__ import annotations

import json
import re
from datetime import datetime

import attrs

# Families of the coordinator's code, oldest first, split where a statement's wording or its
# place changes (spec/verify.md, "Kafka's log statements by version").
F09 = "0.9-0.10"        # "Preparing to restabilize group"; failures and leaves at TRACE
F011 = "0.11-2.0"       # "(__consumer_offsets-P)"; no state, no reason; leaves at DEBUG
F21 = "2.1"             # "in state ... (reason: ...)"; leaves at DEBUG
F22 = "2.2"             # "Member M in group G has left" at INFO
F23 = "2.3"             # "with group instanceid"
F24 = "2.4"             # "Member[group.instance.id ...] has left"
F25 = "2.5-2.6"         # "with group instance id"
F27 = "2.7"             # "remove dynamic members who haven't joined"; "during <state>"
F28 = "2.8"             # "Stabilized ... with M members"; leave line before the rebalance it causes
F30 = "3.0-3.1"         # the leave line after the rebalance it causes, printing the whole member
F32 = "3.2-4.0 (Scala)"  # "; client reason: ..."; the Scala coordinator up to 4.0
F4J = "3.7+ (Java)"     # group-coordinator/ in Java: the default from 4.0, opt-in on 3.7-3.9
FAMILIES = (F09, F011, F21, F22, F23, F24, F25, F27, F28, F30, F32, F4J)
SCALA = frozenset(FAMILIES[:-1])
ANY = frozenset(FAMILIES)
# Where each release falls (``--kafka-version``): the first release of each family.
FIRST_RELEASE = {F09: (0, 9), F011: (0, 11), F21: (2, 1), F22: (2, 2), F23: (2, 3), F24: (2, 4), F25: (2, 5),
                 F27: (2, 7), F28: (2, 8), F30: (3, 0), F32: (3, 2)}


def since(first: str, last: str | None = None) -> frozenset:
    i = FAMILIES.index(first)
    j = FAMILIES.index(last) + 1 if last else len(FAMILIES)
    return frozenset(FAMILIES[i:j])


def families_of_release(version: str) -> frozenset:
    """The families a Kafka release's broker may log as: its Scala family, and from 3.7 on the
    Java coordinator too (the default from 4.0, the only one from 4.1)."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if not m:
        raise ValueError(f"not a Kafka version: {version!r} (expected e.g. 2.3.0 or 3.9)")
    v = (int(m.group(1)), int(m.group(2)))
    scala = max((f for f, first in FIRST_RELEASE.items() if first <= v), key=lambda f: FIRST_RELEASE[f], default=F09)
    if v >= (4, 1):
        return frozenset({F4J})
    return frozenset({scala, F4J}) if v >= (3, 7) else frozenset({scala})


# Families that remove members without an INFO line: up to 2.6 the end of a join phase drops
# the members that did not rejoin silently (GroupCoordinator.onCompleteJoin), and up to 2.1
# failures or leaves are logged below INFO.
SILENT_REMOVALS = since(F09, F25)
# Families whose "Preparing to rebalance" line prints a state: it is logged after
# transitionTo(PreparingRebalance), so the state printed is always PreparingRebalance.
PRINTS_STATE = since(F21)

_NUM = r"(?P<gen>-?\d+)"
_PART = r"(?: \((?P<part>__consumer_offsets-\d+)\))?"


@attrs.frozen
class Statement:
    kind: str          # see kafka_log.py; "reset" lines are about the whole coordinator
    families: frozenset
    pattern: re.Pattern


def _s(kind: str, families: frozenset, regex: str) -> Statement:
    return Statement(kind, families, re.compile(regex))


# Most specific first: the first that matches a message reads it. Matched at the start of
# the message (after Kafka's "[GroupCoordinator B]: " context, or a client's).
STATEMENTS = (
    _s("prepare", since(F09, F09), rf"Preparing to restabilize group (?P<g>.+?) with old generation {_NUM}$"),
    _s("prepare", since(F21), rf"Preparing to rebalance group (?P<g>.+?) in state (?P<state>\w+) with old "
                              rf"generation {_NUM}{_PART} \(reason: (?P<reason>.*)\)(?P<dot>\.?)$"),
    _s("prepare", since(F011, F011), rf"Preparing to rebalance group (?P<g>.+?) with old generation {_NUM}{_PART}$"),
    _s("stable", ANY, rf"Stabilized group (?P<g>.+?) generation {_NUM}{_PART}(?: with (?P<n>\d+) members)?(?P<dot>\.?)$"),
    _s("empty", ANY, rf"Group (?P<g>.+?) with generation {_NUM} is now empty{_PART}(?P<dot>\.?)$"),
    _s("assign", ANY, rf"Assignment received from leader (?:(?P<m>\S+) )?for group (?P<g>.+?) for generation {_NUM}"
                      rf"(?:\. The group has (?P<n>\d+) members, (?P<static>\d+) of which are static)?\.?$"),
    # a member joining, logged before anything changes: the state printed is the group's then
    _s("joins", since(F25), r"(?:Dynamic|Static|Pending dynamic|Pending static) [Mm]ember .*?joins group (?P<g>\S+) in "
                            r"(?:state (?P<state>\w+)\.|(?P<state2>\w+) state\.)"),
    _s("failed", since(F011), r"Member (?P<m>\S+) in group (?P<g>.+?) has failed, removing it from the group"
                              r"(?P<dot>\.?)$"),
    _s("left", since(F011, F23), r"Member (?P<m>\S+) in group (?P<g>.+?) has left, removing it from the group$"),
    _s("left", since(F24, F28), r"Member\[group\.instance\.id (?P<iid>.*?), member\.id (?P<m>.*?)\] in group "
                                r"(?P<g>.+?) has left, removing it from the group$"),
    _s("left", since(F30, F32), r"Member (?P<m>MemberMetadata\(.*\)) has left group (?P<g>\S+) through explicit "
                                r"`LeaveGroup`"),
    _s("left", since(F4J), r"\[Group (?P<g>.+?)\] Member (?P<m>\S+) has left group through explicit `LeaveGroup`"),
    _s("pending-left", ANY, r"(?:\[Group (?P<g2>.+?)\] )?Pending member (?:with memberId=)?(?P<m>\S+?)"
                            r"(?: in group (?P<g>\S+))? (?:is leaving group (?P<g3>.+?)\.$|has left group"
                            r"(?: (?P<g4>\S+))? through|has been removed after session timeout)"),
    _s("removed", since(F27), r"Group (?P<g>.+?) removed? dynamic members who haven't joined: (?P<set>.*)$"),
    _s("load", SCALA, rf"Loading group metadata for (?P<g>.+?) with generation {_NUM}$"),
    _s("aside", since(F28, F32), r"Loaded member .* in group (?P<g>\S+) with generation -?\d+"),
    _s("aside", since(F4J), r"Loaded classic group (?P<g>.+?) with \d+ members\.$"),
    _s("unload", SCALA, rf"Unloading group metadata for (?P<g>.+?) with generation {_NUM}$"),
    _s("unload", since(F4J), rf"\[GroupId=(?P<g>.+?)\] Unloading group metadata for generation {_NUM}\.$"),
    _s("dead", SCALA, rf"Group (?P<g>.+?) transitioned to Dead in generation {_NUM}$"),
    _s("dead", since(F09, F09), rf"Group (?P<g>.+?) generation {_NUM} is dead and removed$"),
    # a write of the group's metadata failed: Scala reverts the static member it was storing, the
    # Java coordinator reverts every change not yet written (its log lines stay)
    _s("aside", ANY, r"Failed to (?:write empty metadata|persist metadata) for group (?P<g>\S+?)[: ]"),
    # KIP-848 consumer groups (Kafka 4.x): epochs, not generations; recognised, not modelled
    _s("consumer-group", since(F4J), r"\[GroupId (?P<g>[^\]]+)\] "),
    _s("consumer-group", since(F4J), r"\[Group (?P<g>.+?)\] (?:Dynamic|Static) Member .* has left group"),
    # a coordinator starting, stopping, taking or giving up a partition, or deleting groups it
    # does not name one by one: every group it held may come back from the log at another
    # generation (or not at all), so what was known of them is forgotten
    _s("reset", ANY, r"(?:Starting up|Startup complete|Shutting down|Shutdown complete)\.?$"),
    _s("reset", ANY, r"(?:Scheduling (?:loading|unloading)|Finished (?:loading|unloading)|Started unloading|"
                     r"Elected as the group coordinator|Resigned as the group coordinator|The following groups were "
                     r"deleted|Generated \d+ tombstone records while cleaning up group metadata)"),
    # clients: the Java consumer and Connect's worker (AbstractCoordinator), kafka-python
    _s("client-joined", ANY, rf"Successfully joined group with generation (?:Generation\{{generationId=)?{_NUM}"),
    _s("client-joined", ANY, rf"Successfully joined group (?P<g>\S+?) with generation {_NUM}"),
    _s("client-joined", ANY, rf"Joined group '(?P<g>[^']+)' \(generation {_NUM}\)"),  # kafka-python 1.x
    _s("client-synced", ANY, rf"Successfully synced group in generation (?:Generation\{{generationId=)?{_NUM}"),
    _s("client-rebalancing", ANY, r"Attempt to heartbeat failed (?:for group (?P<g>\S+) )?since group is "
                                  r"rebalancing"),
)

def _leads(statement: Statement) -> tuple[str, ...]:
    """The words a statement's message can start with, to try only the statements a message
    could be: its regex's leading word, the leading word of each branch of a leading ``(?:...)``
    group, or both sides of a leading optional ``[Group G] `` context."""
    text = statement.pattern.pattern
    if text.startswith(r"(?:\[Group"):
        return "[Group", text.split(")?", 1)[1].split(" ")[0]
    if not text.startswith("(?:"):
        return (re.match(r"(?:\\\[|\w)+", text).group().replace("\\", ""),)
    branches, depth, begin = [], 0, 3
    for i, c in enumerate(text[3:], start=3):
        if c == "(":
            depth += 1
        elif c == ")" and depth == 0:
            branches.append(text[begin:i])
            break
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            branches.append(text[begin:i])
            begin = i + 1
    return tuple(re.match(r"\w+", b).group() for b in branches)


_BY_LEAD: dict[str, list[Statement]] = {}
for _statement in STATEMENTS:
    for _lead in _leads(_statement):
        if _statement not in _BY_LEAD.setdefault(_lead, []):
            _BY_LEAD[_lead].append(_statement)
_LEADS = re.compile("|".join(re.escape(k) for k in sorted(_BY_LEAD, key=len, reverse=True)))


# What a line's optional parts say of its family: (kind, field, test, families if it holds).
_WORDING = (
    ("prepare", "reason", lambda r: r.startswith("Adding new member") and " with group " not in r, since(F21, F22)),
    ("prepare", "reason", lambda r: "with group instanceid" in r, since(F23, F24)),
    ("prepare", "reason", lambda r: "with group instance id" in r and "; client reason:" not in r, since(F25, F30)),
    ("prepare", "reason", lambda r: "; client reason:" in r, since(F32)),
    ("prepare", "reason", lambda r: r.startswith("leader "), since(F27, F28)),
    ("prepare", "reason", lambda r: r.startswith("removing member ") and r.endswith("on LeaveGroup"),
     since(F21, F28)),
    ("prepare", "reason", lambda r: r.startswith("Removing member ") and "on LeaveGroup" in r, since(F30)),
    ("prepare", "reason", lambda r: r.startswith("explicit `LeaveGroup` request for"), since(F4J)),
    ("prepare", "reason", lambda r: r.startswith("Updating metadata for member") and " during " not in r,
     since(F21, F25)),
    ("prepare", "reason", lambda r: r.endswith("on heartbeat expiration."), since(F4J)),
    ("prepare", "reason", lambda r: r.endswith("on heartbeat expiration"), SCALA),
    ("prepare", "part", lambda p: p is not None, SCALA),
    ("prepare", "dot", lambda d: d == ".", since(F4J)),
    ("stable", "part", lambda p: p is None, since(F09, F09) | since(F4J)),
    ("stable", "part", lambda p: p is not None, since(F011, F32)),
    ("stable", "n", lambda n: n is None, since(F09, F27)),
    ("stable", "n", lambda n: n is not None, since(F28)),
    ("empty", "part", lambda p: p is None, since(F09, F09) | since(F4J)),
    ("empty", "part", lambda p: p is not None, since(F011, F32)),
    ("assign", "m", lambda m: m is None, since(F09, F28)),
    ("assign", "m", lambda m: m is not None, since(F30)),
    ("assign", "n", lambda n: n is None, since(F09, F27)),
    ("failed", "dot", lambda d: d == ".", since(F4J)),
    ("failed", "dot", lambda d: d == "", SCALA),
)


def _refine(kind: str, found: dict, families: frozenset) -> frozenset:
    for k, name, test, fams in _WORDING:
        if k == kind and name in found:
            value = found[name]
            try:
                holds = test(value)
            except (AttributeError, TypeError):
                holds = False
            if holds:
                families = families & fams
    return families


# Kafka's layout puts the logger's name in parentheses at the end; the client-side lines name
# the group in a context prefix.
# Kafka's layout ends a line with the logger in parentheses (" (kafka.coordinator.group.GroupCoordinator)"),
# other layouts with " | logger (File.scala:68)"; a thread name in brackets may follow.
_LOGGER = re.compile(r"\s*(?:\|\s*(?:[a-z_][\w$]*\.)+[\w$]+(?:\s*\([\w.$]+:\d+\))?|\((?:[a-z_][\w$]*\.)+[\w$]+\))"
                     r"(?:\s*\[[^\]]*\])?[^()]{0,60}$")  # then a thread, markup or a shipper's field
_CLIENT = re.compile(r"\[(?:Consumer|Worker|Producer) clientId=(?P<c>[^,\]]*), groupId=(?P<g>[^\]]*)\]\s*")
_COORDINATOR = re.compile(r"\[(?:GroupCoordinator|GroupMetadataManager)(?: id=| brokerId=| )(?P<b>\d+)[^\]]*\]:?\s*")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,9})?)")
_KEYWORDS = ("group", "Group", "generation", "rebalanc", "restabiliz", "Start", "Shut", "Scheduling", "Finished",
             "Elected", "Resigned")


@attrs.frozen
class Line:
    """One statement read from a log line."""
    kind: str
    group_id: str
    where: str            # file:line
    time_ms: int | None   # the application's own timestamp, in ms (naive: no zone)
    time: str | None
    families: frozenset
    broker: str | None = None  # the coordinator's broker id, from the line's context
    generation: int | None = None
    state: str | None = None
    members: int | None = None
    member: str | None = None
    removed: tuple = ()   # the member ids a line says were removed (a removal line, a rebalance's reason)
    reason: str | None = None
    text: str = ""


def parse(raw: str, where: str) -> Line | None:
    """The statement a raw line holds, or None. Never raises on odd input."""
    if not any(k in raw for k in _KEYWORDS):
        return None
    if raw.lstrip().startswith("{"):
        raw = _from_json(raw)
    body = raw.rstrip()
    tail = _LOGGER.search(body, max(0, len(body) - 400))
    if tail:
        body = body[:tail.start()]
    context_group = broker = None
    start = 0
    for m in _CLIENT.finditer(body):
        context_group, start = m.group("g"), m.end()
    m = _COORDINATOR.search(body)
    if m and m.end() > start:
        broker, start = m.group("b"), m.end()
    prefix = body[:start]
    lost = None
    for at in ((start,) if start else _message_starts(body)):
        lead = _LEADS.match(body, at)
        if lead is None:
            continue
        for statement in _BY_LEAD[lead.group()]:
            found = statement.pattern.match(body, at)
            if found is None:
                continue
            d = found.groupdict()
            group = d.get("g") or d.get("g2") or d.get("g3") or d.get("g4") or context_group
            if not group and statement.kind != "reset":
                continue
            stamp = _stamp(prefix or body[:at])
            return Line(statement.kind, (group or "").rstrip(".,"), where, stamp[1], stamp[0],
                        _refine(statement.kind, d, statement.families) or statement.families, broker,
                        int(d["gen"]) if d.get("gen") is not None else None, d.get("state") or d.get("state2"),
                        int(d["n"]) if d.get("n") is not None else None, d.get("m"), _removed(statement.kind, d, where),
                        d.get("reason"), raw.strip()[:300])
        if broker is not None and lead.group() in _GROUP_LEADS and lost is None:
            lost = at
    if lost is not None:
        # a coordinator's message that starts as a group statement does but reads as none (cut
        # short, wrapped, a wording not known): what it said is lost, not unsaid
        loose = _LOOSE_GROUP.search(body, lost)
        stamp = _stamp(prefix)
        return Line("unreadable", loose.group(1).rstrip(".,") if loose else "", where, stamp[1], stamp[0], ANY,
                    broker, text=raw.strip()[:300])
    return None


_GROUP_LEADS = {"Preparing", "Stabilized", "Group", "Assignment", "Member", "Member[group", "Dynamic", "Static",
                "Pending", "[Group", "Loading", "Unloading"}
_LOOSE_GROUP = re.compile(r"\b(?:group|Group|GroupId=?)\s*(?:\[)?([^\s\]]+)")


def _from_json(raw: str) -> str:
    """A JSON log record (a shipper's, Docker's) as a plain line: its time, then its message."""
    try:
        record = json.loads(raw.strip().rstrip(","))
    except ValueError:
        return raw
    if not isinstance(record, dict):
        return raw
    message = next((record[k] for k in ("message", "msg", "log", "@message") if isinstance(record.get(k), str)), None)
    if message is None:
        return raw
    stamp = next((record[k] for k in ("ts", "@timestamp", "timestamp", "time") if isinstance(record.get(k), str)), "")
    return f"{stamp} {message.rstrip()}" if not _STAMP.search(message[:40]) else message.rstrip()


_SEPARATORS = re.compile(r"\]:? |: | - |\| |\b(?:INFO|WARN|WARNING|DEBUG|ERROR|TRACE)\s+")


def _message_starts(text: str):
    """Where a message can start in a line whose prefix is unknown: at the start, and after
    each separator a logger or shipper puts before it ('] ', ': ', ' - ', '| ', a level)."""
    yield 0
    at = 0
    while True:
        m = _SEPARATORS.search(text, at)
        if m is None:
            return
        yield m.end()
        at = m.start() + 1  # separators may overlap ("INFO - ")


def _stamp(prefix: str) -> tuple[str | None, int | None]:
    """The last timestamp before the message: the application's own, not a shipper's (ms,
    read as UTC: zones are not compared, only differences within one source)."""
    found = _STAMP.findall(prefix)
    if not found:
        return None, None
    text = found[-1]
    d = _FIELDS.match(text)
    if d is None:
        return text, None
    y, mo, day, h, mi, sec, frac = d.groups()
    try:
        days = datetime(int(y), int(mo), int(day)).toordinal() - _EPOCH
    except ValueError:
        return text, None
    ms = int((frac or "0")[:3].ljust(3, "0"))
    return text, ((days * 24 + int(h)) * 60 + int(mi)) * 60_000 + int(sec) * 1000 + ms


_FIELDS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d+))?")
_EPOCH = datetime(1970, 1, 1).toordinal()


def members_named(members: str) -> list[str]:
    """The member ids ``Set(a, b)`` / ``HashSet(a)`` / ``[a, b]`` / ``(a, b)`` / ``a, b`` names."""
    inner = members.strip().rstrip(".")
    inner = re.sub(r"^(?:Set|HashSet|List)?[(\[{]", "", inner)
    inner = re.sub(r"[)\]}]$", "", inner).strip()
    return [p.strip() for p in inner.split(",") if p.strip()] if inner else []


# A rebalance's reason that says members were removed before it was logged.
_REMOVING = (
    re.compile(r"^[Rr]emoving member (\S+) on (?:heartbeat expiration|LeaveGroup)"),
    re.compile(r"^Removing (.*) on pending sync request expiration"),
    re.compile(r"^explicit `LeaveGroup` request for \((.*)\) members\.$"),
)


def _removed(kind: str, d: dict, where: str) -> tuple:
    """The ids a line says were removed; one that names none it can read counts as one member."""
    if kind in ("failed", "left"):
        member = d.get("m") or ""
        inner = re.search(r"memberId=([^,)]+)", member)
        return (inner.group(1) if inner else member or f"?{where}",)
    if kind == "removed":
        return tuple(members_named(d["set"])) or (f"?{where}",)
    if kind == "prepare" and d.get("reason"):
        for pattern in _REMOVING:
            m = pattern.match(d["reason"])
            if m:
                return tuple(members_named(m.group(1))) or (f"?{where}",)
    return ()
