"""Request/response field facts for the 13 Kafka group-coordination APIs (the classic
protocol's eleven, and KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe).

The table below was derived from Apache Kafka's JSON message schemas (commit
1eb7644349cb07139d6a3c1ad1986979647cac99; KIP-848's two APIs from a newer commit,
aed0d799945379703d9b7d155691993f0fffe746, where ConsumerGroupHeartbeat v1 adds
SubscribedTopicRegex and ConsumerGroupDescribe v1 adds the member's MemberType); it records
facts only: field names (snake_case), types, version ranges, nullable ranges, defaults and
the first flexible version.  None of these schemas has tagged fields.

Table notation, per API::

    name: ((min, max) schema versions, first flexible version or None,
           [request fields], [response fields])

API keys come from the codec's one table (kio's, generated from the same schemas).

A field is ``(name, versions, type[, nullable[, default]])``:

* ``versions`` / ``nullable`` are version ranges: ``(lo,)`` means lo and up,
  ``(lo, hi)`` is inclusive; ``nullable`` None means never nullable.
* ``type`` is "i8" "i16" "i32" "i64" "str" "bytes" "bool" "uuid" "[i32]" "[str]",
  a list of fields for an array of structs, or ``Struct([fields])`` for one nested
  struct (not an array).  A "uuid" value is a ``uuid.UUID``; None stands for the
  all-zero uuid (kio reads it as None), which is also its zero.
* ``default`` is the schema's explicit default; without one the type's zero
  is used (0, "", b"", False, the zero uuid, [], a struct of its fields' defaults).

SCHEMA_VERSIONS holds each schema's own version range; SUPPORTED_VERSIONS is
the range this project accepts (clipped to the schema's).
"""

import uuid

from groupcoord.adapters.protocol import codec


class Struct(tuple):
    """A field's type when it is one nested struct (Kafka: a field whose type names a struct,
    not ``[]``): the struct's fields."""


ZERO_UUID = uuid.UUID(int=0)

# KIP-848's partitions by topic id, as ConsumerGroupHeartbeat's request and response name them.
_TOPIC_ID_PARTITIONS = [
    ("topic_id", (0,), "uuid"),
    ("partitions", (0,), "[i32]"),
]
# ConsumerGroupDescribe's member assignments: the topic's name too.
_DESCRIBED_ASSIGNMENT = Struct([
    ("topic_partitions", (0,), [
        ("topic_id", (0,), "uuid"),
        ("topic_name", (0,), "str"),
        ("partitions", (0,), "[i32]"),
    ]),
])

SCHEMAS = {
    "JoinGroup": ((0, 9), 6, [
        ("group_id", (0,), "str"),
        ("session_timeout_ms", (0,), "i32"),
        ("rebalance_timeout_ms", (1,), "i32", None, -1),
        ("member_id", (0,), "str"),
        ("group_instance_id", (5,), "str", (5,), None),
        ("protocol_type", (0,), "str"),
        ("protocols", (0,), [
            ("name", (0,), "str"),
            ("metadata", (0,), "bytes"),
        ]),
        ("reason", (8,), "str", (8,), None),
    ], [
        ("throttle_time_ms", (2,), "i32"),
        ("error_code", (0,), "i16"),
        ("generation_id", (0,), "i32", None, -1),
        ("protocol_type", (7,), "str", (7,), None),
        ("protocol_name", (0,), "str", (7,)),
        ("leader", (0,), "str"),
        ("skip_assignment", (9,), "bool", None, False),
        ("member_id", (0,), "str"),
        ("members", (0,), [
            ("member_id", (0,), "str"),
            ("group_instance_id", (5,), "str", (5,), None),
            ("metadata", (0,), "bytes"),
        ]),
    ]),
    "SyncGroup": ((0, 5), 4, [
        ("group_id", (0,), "str"),
        ("generation_id", (0,), "i32"),
        ("member_id", (0,), "str"),
        ("group_instance_id", (3,), "str", (3,), None),
        ("protocol_type", (5,), "str", (5,), None),
        ("protocol_name", (5,), "str", (5,), None),
        ("assignments", (0,), [
            ("member_id", (0,), "str"),
            ("assignment", (0,), "bytes"),
        ]),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("error_code", (0,), "i16"),
        ("protocol_type", (5,), "str", (5,), None),
        ("protocol_name", (5,), "str", (5,), None),
        ("assignment", (0,), "bytes"),
    ]),
    "Heartbeat": ((0, 4), 4, [
        ("group_id", (0,), "str"),
        ("generation_id", (0,), "i32"),
        ("member_id", (0,), "str"),
        ("group_instance_id", (3,), "str", (3,), None),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("error_code", (0,), "i16"),
    ]),
    "LeaveGroup": ((0, 5), 4, [
        ("group_id", (0,), "str"),
        ("member_id", (0, 2), "str"),
        ("members", (3,), [
            ("member_id", (3,), "str"),
            ("group_instance_id", (3,), "str", (3,), None),
            ("reason", (5,), "str", (5,), None),
        ]),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("error_code", (0,), "i16"),
        ("members", (3,), [
            ("member_id", (3,), "str"),
            ("group_instance_id", (3,), "str", (3,)),
            ("error_code", (3,), "i16"),
        ]),
    ]),
    "OffsetCommit": ((0, 9), 8, [
        ("group_id", (0,), "str"),
        ("generation_id_or_member_epoch", (1,), "i32", None, -1),
        ("member_id", (1,), "str"),
        ("group_instance_id", (7,), "str", (7,), None),
        ("retention_time_ms", (2, 4), "i64", None, -1),
        ("topics", (0,), [
            ("name", (0,), "str"),
            ("partitions", (0,), [
                ("partition_index", (0,), "i32"),
                ("committed_offset", (0,), "i64"),
                ("committed_leader_epoch", (6,), "i32", None, -1),
                ("commit_timestamp", (1, 1), "i64", None, -1),
                ("committed_metadata", (0,), "str", (0,)),
            ]),
        ]),
    ], [
        ("throttle_time_ms", (3,), "i32"),
        ("topics", (0,), [
            ("name", (0,), "str"),
            ("partitions", (0,), [
                ("partition_index", (0,), "i32"),
                ("error_code", (0,), "i16"),
            ]),
        ]),
    ]),
    "OffsetFetch": ((0, 9), 6, [
        ("group_id", (0, 7), "str"),
        ("topics", (0, 7), [
            ("name", (0, 7), "str"),
            ("partition_indexes", (0, 7), "[i32]"),
        ], (2, 7)),
        ("groups", (8,), [
            ("group_id", (8,), "str"),
            ("member_id", (9,), "str", (9,), None),
            ("member_epoch", (9,), "i32", None, -1),
            ("topics", (8,), [
                ("name", (8,), "str"),
                ("partition_indexes", (8,), "[i32]"),
            ], (8,)),
        ]),
        ("require_stable", (7,), "bool", None, False),
    ], [
        ("throttle_time_ms", (3,), "i32"),
        ("topics", (0, 7), [
            ("name", (0, 7), "str"),
            ("partitions", (0, 7), [
                ("partition_index", (0, 7), "i32"),
                ("committed_offset", (0, 7), "i64"),
                ("committed_leader_epoch", (5, 7), "i32", None, -1),
                ("metadata", (0, 7), "str", (0, 7)),
                ("error_code", (0, 7), "i16"),
            ]),
        ]),
        ("error_code", (2, 7), "i16", None, 0),
        ("groups", (8,), [
            ("group_id", (8,), "str"),
            ("topics", (8,), [
                ("name", (8,), "str"),
                ("partitions", (8,), [
                    ("partition_index", (8,), "i32"),
                    ("committed_offset", (8,), "i64"),
                    ("committed_leader_epoch", (8,), "i32", None, -1),
                    ("metadata", (8,), "str", (8,)),
                    ("error_code", (8,), "i16"),
                ]),
            ]),
            ("error_code", (8,), "i16", None, 0),
        ]),
    ]),
    "DescribeGroups": ((0, 5), 5, [
        ("groups", (0,), "[str]"),
        ("include_authorized_operations", (3,), "bool"),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("groups", (0,), [
            ("error_code", (0,), "i16"),
            ("group_id", (0,), "str"),
            ("group_state", (0,), "str"),
            ("protocol_type", (0,), "str"),
            ("protocol_data", (0,), "str"),
            ("members", (0,), [
                ("member_id", (0,), "str"),
                ("group_instance_id", (4,), "str", (4,), None),
                ("client_id", (0,), "str"),
                ("client_host", (0,), "str"),
                ("member_metadata", (0,), "bytes"),
                ("member_assignment", (0,), "bytes"),
            ]),
            ("authorized_operations", (3,), "i32", None, -2147483648),
        ]),
    ]),
    "ListGroups": ((0, 5), 3, [
        ("states_filter", (4,), "[str]"),
        ("types_filter", (5,), "[str]"),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("error_code", (0,), "i16"),
        ("groups", (0,), [
            ("group_id", (0,), "str"),
            ("protocol_type", (0,), "str"),
            ("group_state", (4,), "str"),
            ("group_type", (5,), "str"),
        ]),
    ]),
    "DeleteGroups": ((0, 2), 2, [
        ("groups_names", (0,), "[str]"),
    ], [
        ("throttle_time_ms", (0,), "i32"),
        ("results", (0,), [
            ("group_id", (0,), "str"),
            ("error_code", (0,), "i16"),
        ]),
    ]),
    "OffsetDelete": ((0, 0), None, [
        ("group_id", (0,), "str"),
        ("topics", (0,), [
            ("name", (0,), "str"),
            ("partitions", (0,), [
                ("partition_index", (0,), "i32"),
            ]),
        ]),
    ], [
        ("error_code", (0,), "i16"),
        ("throttle_time_ms", (0,), "i32"),
        ("topics", (0,), [
            ("name", (0,), "str"),
            ("partitions", (0,), [
                ("partition_index", (0,), "i32"),
                ("error_code", (0,), "i16"),
            ]),
        ]),
    ]),
    "FindCoordinator": ((0, 6), 3, [
        ("key", (0, 3), "str"),
        ("key_type", (1,), "i8", None, 0),
        ("coordinator_keys", (4,), "[str]"),
    ], [
        ("throttle_time_ms", (1,), "i32"),
        ("error_code", (0, 3), "i16"),
        ("error_message", (1, 3), "str", (1, 3)),
        ("node_id", (0, 3), "i32"),
        ("host", (0, 3), "str"),
        ("port", (0, 3), "i32"),
        ("coordinators", (4,), [
            ("key", (4,), "str"),
            ("node_id", (4,), "i32"),
            ("host", (4,), "str"),
            ("port", (4,), "i32"),
            ("error_code", (4,), "i16"),
            ("error_message", (4,), "str", (4,)),
        ]),
    ]),
    "ConsumerGroupHeartbeat": ((0, 1), 0, [
        ("group_id", (0,), "str"),
        ("member_id", (0,), "str"),
        ("member_epoch", (0,), "i32"),
        ("instance_id", (0,), "str", (0,), None),
        ("rack_id", (0,), "str", (0,), None),
        ("rebalance_timeout_ms", (0,), "i32", None, -1),
        ("subscribed_topic_names", (0,), "[str]", (0,), None),
        ("subscribed_topic_regex", (1,), "str", (1,), None),
        ("server_assignor", (0,), "str", (0,), None),
        ("topic_partitions", (0,), _TOPIC_ID_PARTITIONS, (0,), None),
    ], [
        ("throttle_time_ms", (0,), "i32"),
        ("error_code", (0,), "i16"),
        ("error_message", (0,), "str", (0,), None),
        ("member_id", (0,), "str", (0,), None),
        ("member_epoch", (0,), "i32"),
        ("heartbeat_interval_ms", (0,), "i32"),
        ("assignment", (0,), Struct([
            ("topic_partitions", (0,), _TOPIC_ID_PARTITIONS),
        ]), (0,), None),
    ]),
    "ConsumerGroupDescribe": ((0, 1), 0, [
        ("group_ids", (0,), "[str]"),
        ("include_authorized_operations", (0,), "bool"),
    ], [
        ("throttle_time_ms", (0,), "i32"),
        ("groups", (0,), [
            ("error_code", (0,), "i16"),
            ("error_message", (0,), "str", (0,), None),
            ("group_id", (0,), "str"),
            ("group_state", (0,), "str"),
            ("group_epoch", (0,), "i32"),
            ("assignment_epoch", (0,), "i32"),
            ("assignor_name", (0,), "str"),
            ("members", (0,), [
                ("member_id", (0,), "str"),
                ("instance_id", (0,), "str", (0,), None),
                ("rack_id", (0,), "str", (0,), None),
                ("member_epoch", (0,), "i32"),
                ("client_id", (0,), "str"),
                ("client_host", (0,), "str"),
                ("subscribed_topic_names", (0,), "[str]"),
                ("subscribed_topic_regex", (0,), "str", (0,), None),
                ("assignment", (0,), _DESCRIBED_ASSIGNMENT),
                ("target_assignment", (0,), _DESCRIBED_ASSIGNMENT),
                ("member_type", (1,), "i8", None, -1),
            ]),
            ("authorized_operations", (0,), "i32", None, -2147483648),
        ]),
    ]),
}

_PROJECT_VERSIONS = {
    "JoinGroup": (0, 9), "SyncGroup": (0, 5), "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5), "OffsetCommit": (2, 9), "OffsetFetch": (1, 9),
    "DescribeGroups": (0, 5), "ListGroups": (0, 5), "DeleteGroups": (0, 2),
    "OffsetDelete": (0, 0), "FindCoordinator": (0, 6),
    "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1),
}

API_NAMES = tuple(SCHEMAS)
API_KEYS = {n: codec.API_KEYS[n] for n in SCHEMAS}
SCHEMA_VERSIONS = {n: s[0] for n, s in SCHEMAS.items()}
FLEXIBLE_FROM = {n: s[1] for n, s in SCHEMAS.items()}
# What this project accepts, clipped to what the schema defines.
SUPPORTED_VERSIONS = {
    n: (max(lo, SCHEMA_VERSIONS[n][0]), min(hi, SCHEMA_VERSIONS[n][1]))
    for n, (lo, hi) in _PROJECT_VERSIONS.items()
}

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_ZERO = {"i8": 0, "i16": 0, "i32": 0, "i64": 0, "str": "", "bytes": b"", "bool": False, "uuid": ZERO_UUID}
_PYTYPE = {"str": str, "bytes": bytes, "bool": bool, "uuid": uuid.UUID}


class SchemaError(ValueError):
    """A body does not fit the schema of the named API and version."""


def _in(rng, v):
    return rng is not None and rng[0] <= v and (len(rng) == 1 or v <= rng[1])


def _fmt(rng):
    if len(rng) == 1:
        return "%d+" % rng[0]
    return "%d" % rng[0] if rng[0] == rng[1] else "%d-%d" % rng


def _zero(typ):
    if isinstance(typ, Struct):
        return {f[0]: _default(f) for f in typ}
    return [] if isinstance(typ, list) or typ.startswith("[") else _ZERO[typ]


def _default(field):
    return field[4] if len(field) > 4 else _zero(field[2])


def _scalar(where, typ, value):
    if typ in _INT_BITS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaError("%s: expected int, got %s" % (where, type(value).__name__))
        lim = 1 << (_INT_BITS[typ] - 1)
        if not -lim <= value < lim:
            raise SchemaError("%s: %d does not fit in %s" % (where, value, typ))
    elif not isinstance(value, _PYTYPE[typ]):
        raise SchemaError("%s: expected %s, got %s" % (where, typ, type(value).__name__))
    return value


def _value(ctx, v, field, value, where, response):
    typ = field[2]
    if value is None:
        nullable = field[3] if len(field) > 3 else None
        if _in(nullable, v):
            return None
        if typ == "uuid":
            return ZERO_UUID  # kio reads the all-zero uuid as None
        if response and typ != "bool" and typ not in _INT_BITS:
            if isinstance(typ, Struct):
                return _build(ctx, v, typ, {}, where + ".", response)
            return _zero(typ)  # non-nullable str/bytes/array here: send it empty
    if isinstance(typ, Struct):
        return _build(ctx, v, typ, value, where + ".", response)
        raise SchemaError("%s: %s may not be None in v%d (nullable: %s)"
                          % (ctx, where, v, _fmt(nullable) if nullable else "never"))
    if not isinstance(typ, str) or typ.startswith("["):
        if not isinstance(value, (list, tuple)):
            raise SchemaError("%s: %s: expected a list, got %s"
                              % (ctx, where, type(value).__name__))
        if isinstance(typ, list):
            return [_build(ctx, v, typ, e, "%s[%d]." % (where, i), response)
                    for i, e in enumerate(value)]
        return [_scalar("%s: %s[%d]" % (ctx, where, i), typ[1:-1], e) for i, e in enumerate(value)]
    return _scalar("%s: %s" % (ctx, where), typ, value)


def _build(ctx, v, fields, body, prefix, response):
    if not isinstance(body, dict):
        raise SchemaError("%s: %s expected a dict, got %s"
                          % (ctx, prefix.rstrip(".") or "body", type(body).__name__))
    by_name = {f[0]: f for f in fields}
    for key in body:
        field = by_name.get(key)
        if field is None:
            raise SchemaError("%s: unknown field %r" % (ctx, prefix + str(key)))
        if not response and not _in(field[1], v):
            raise SchemaError("%s: field %r exists only in versions %s"
                              % (ctx, prefix + key, _fmt(field[1])))
    out = {}
    for field in fields:
        if _in(field[1], v):
            name = field[0]
            out[name] = (_value(ctx, v, field, body[name], prefix + name, response)
                         if name in body else _default(field))
    return out


def _schema(api, version, side):
    if api not in SCHEMAS:
        raise SchemaError("unknown API %r" % (api,))
    lo, hi = SUPPORTED_VERSIONS[api]
    if not isinstance(version, int) or isinstance(version, bool) or not lo <= version <= hi:
        raise SchemaError("%s: version %r not supported (supported: %d-%d)"
                          % (api, version, lo, hi))
    return "%s%s v%d" % (api, ("Request", "Response")[side], version), SCHEMAS[api][2 + side]


def request_with_defaults(api, version, body):
    """New dict with every request field of `version`: given values, else defaults."""
    ctx, fields = _schema(api, version, 0)
    return _build(ctx, version, fields, body, "", False)


def shape_response(api, version, body):
    """New dict with exactly the response fields of `version` (others dropped)."""
    ctx, fields = _schema(api, version, 1)
    return _build(ctx, version, fields, body, "", True)


def shape_request(api, version, body):
    """New dict with exactly the request fields of `version` (others dropped)."""
    ctx, fields = _schema(api, version, 0)
    return _build(ctx, version, fields, body, "", True)


def request_fields(api, version):
    _ctx, fields = _schema(api, version, 0)
    return tuple(f[0] for f in fields if _in(f[1], version))


def response_fields(api, version):
    _ctx, fields = _schema(api, version, 1)
    return tuple(f[0] for f in fields if _in(f[1], version))


def is_flexible(api, version):
    _schema(api, version, 0)
    return FLEXIBLE_FROM[api] is not None and version >= FLEXIBLE_FROM[api]
