import pytest

from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol.schema import SchemaError


def test_public_tables():
    assert schema.API_NAMES == (
        "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
        "OffsetFetch", "DescribeGroups", "ListGroups", "DeleteGroups",
        "OffsetDelete", "FindCoordinator", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
    )
    assert schema.API_KEYS["JoinGroup"] == 11
    assert schema.API_KEYS["OffsetCommit"] == 8
    assert schema.API_KEYS["OffsetDelete"] == 47
    assert schema.SUPPORTED_VERSIONS["OffsetCommit"] == (2, 9)
    assert schema.SUPPORTED_VERSIONS["OffsetFetch"] == (1, 9)
    assert schema.SUPPORTED_VERSIONS["DescribeGroups"] == (0, 5)
    assert schema.SCHEMA_VERSIONS["OffsetCommit"] == (0, 9)


def test_join_group_v3_has_no_group_instance_id():
    assert "group_instance_id" not in schema.request_fields("JoinGroup", 3)
    assert "group_instance_id" not in schema.request_with_defaults("JoinGroup", 3, {})
    with pytest.raises(SchemaError, match=r"group_instance_id.*5\+"):
        schema.request_with_defaults("JoinGroup", 3, {"group_instance_id": "i-1"})


def test_join_group_v5_defaults():
    req = schema.request_with_defaults("JoinGroup", 5, {"group_id": "g"})
    assert req["group_instance_id"] is None
    assert req["rebalance_timeout_ms"] == -1
    assert req["member_id"] == ""
    assert req["protocols"] == []
    assert "reason" not in req


def test_join_group_v0_has_no_rebalance_timeout():
    assert "rebalance_timeout_ms" not in schema.request_fields("JoinGroup", 0)
    with pytest.raises(SchemaError):
        schema.request_with_defaults("JoinGroup", 0, {"rebalance_timeout_ms": 5000})


def test_nested_struct_defaults_and_copy():
    body = {"protocols": [{"name": "range"}]}
    req = schema.request_with_defaults("JoinGroup", 1, body)
    assert req["protocols"] == [{"name": "range", "metadata": b""}]
    assert body == {"protocols": [{"name": "range"}]}  # input untouched
    assert req["protocols"] is not body["protocols"]


def test_nested_unknown_and_wrong_type():
    with pytest.raises(SchemaError, match="unknown field"):
        schema.request_with_defaults("JoinGroup", 1, {"protocols": [{"nme": "range"}]})
    with pytest.raises(SchemaError, match="metadata"):
        schema.request_with_defaults("JoinGroup", 1, {"protocols": [{"metadata": "00ff"}]})


def test_type_checks():
    with pytest.raises(SchemaError):
        schema.request_with_defaults("JoinGroup", 1, {"session_timeout_ms": True})
    with pytest.raises(SchemaError):
        schema.request_with_defaults("JoinGroup", 1, {"session_timeout_ms": "10"})
    with pytest.raises(SchemaError):
        schema.request_with_defaults("JoinGroup", 1, {"session_timeout_ms": 2 ** 31})
    with pytest.raises(SchemaError, match="group_id"):
        schema.request_with_defaults("JoinGroup", 1, {"group_id": None})


def test_join_group_response_v5_shaping():
    out = schema.shape_response("JoinGroup", 5, {
        "error_code": 0, "generation_id": 3, "protocol_type": "consumer",
        "protocol_name": None, "leader": "m1", "skip_assignment": True,
        "member_id": "m1", "members": [{"member_id": "m1", "group_instance_id": None}],
    })
    assert "protocol_type" not in out
    assert "skip_assignment" not in out
    assert out["protocol_name"] == ""
    assert out["throttle_time_ms"] == 0
    assert out["members"] == [{"member_id": "m1", "group_instance_id": None, "metadata": b""}]


def test_join_group_response_v7_keeps_null_protocol_name():
    out = schema.shape_response("JoinGroup", 7, {"protocol_name": None})
    assert out["protocol_name"] is None
    assert out["protocol_type"] is None
    assert out["generation_id"] == -1
    assert "skip_assignment" not in out
    assert schema.shape_response("JoinGroup", 9, {})["skip_assignment"] is False


def test_join_group_response_v0_drops_throttle_and_nested_instance_id():
    out = schema.shape_response("JoinGroup", 0, {
        "throttle_time_ms": 5, "members": [{"member_id": "m", "group_instance_id": "i"}],
    })
    assert "throttle_time_ms" not in out
    assert out["members"] == [{"member_id": "m", "metadata": b""}]


def test_shape_response_unknown_key_raises():
    with pytest.raises(SchemaError, match="unknown field"):
        schema.shape_response("Heartbeat", 4, {"error_code": 0, "eror_code": 1})


def test_leave_group_versions():
    v2 = schema.request_fields("LeaveGroup", 2)
    v3 = schema.request_fields("LeaveGroup", 3)
    assert "member_id" in v2 and "members" not in v2
    assert "members" in v3 and "member_id" not in v3
    req = schema.request_with_defaults("LeaveGroup", 3, {"members": [{"member_id": "m"}]})
    assert req["members"] == [{"member_id": "m", "group_instance_id": None}]
    req = schema.request_with_defaults("LeaveGroup", 5, {"members": [{"member_id": "m"}]})
    assert req["members"][0]["reason"] is None


def test_offset_fetch_versions():
    v7 = schema.request_fields("OffsetFetch", 7)
    v8 = schema.request_fields("OffsetFetch", 8)
    assert "group_id" in v7 and "topics" in v7 and "groups" not in v7
    assert "groups" in v8 and "group_id" not in v8 and "topics" not in v8
    assert schema.request_with_defaults("OffsetFetch", 7, {"topics": None})["topics"] is None
    with pytest.raises(SchemaError):  # topics nullable only from v2
        schema.request_with_defaults("OffsetFetch", 1, {"topics": None})
    req = schema.request_with_defaults("OffsetFetch", 9, {"groups": [{"group_id": "g"}]})
    assert req["groups"] == [
        {"group_id": "g", "member_id": None, "member_epoch": -1, "topics": []}]


def test_offset_commit_retention():
    assert "retention_time_ms" in schema.request_fields("OffsetCommit", 2)
    assert "retention_time_ms" not in schema.request_fields("OffsetCommit", 5)
    assert schema.request_with_defaults("OffsetCommit", 2, {})["retention_time_ms"] == -1
    with pytest.raises(SchemaError, match="2-4"):
        schema.request_with_defaults("OffsetCommit", 5, {"retention_time_ms": 1000})


def test_unknown_field_raises():
    with pytest.raises(SchemaError, match="unknown field"):
        schema.request_with_defaults("Heartbeat", 4, {"group": "g"})


@pytest.mark.parametrize("api,version", [
    ("JoinGroup", 10), ("JoinGroup", -1), ("OffsetCommit", 1), ("OffsetFetch", 0),
    ("OffsetDelete", 1), ("DescribeGroups", 6),
])
def test_version_out_of_range(api, version):
    with pytest.raises(SchemaError):
        schema.request_with_defaults(api, version, {})
    with pytest.raises(SchemaError):
        schema.shape_response(api, version, {})


def test_unknown_api():
    with pytest.raises(SchemaError):
        schema.request_fields("Produce", 0)


def test_is_flexible():
    assert not schema.is_flexible("JoinGroup", 5)
    assert schema.is_flexible("JoinGroup", 6)
    assert not schema.is_flexible("OffsetDelete", 0)
    assert schema.is_flexible("FindCoordinator", 3)


def test_find_coordinator_shapes():
    assert schema.request_fields("FindCoordinator", 0) == ("key",)
    assert schema.request_fields("FindCoordinator", 4) == ("key_type", "coordinator_keys")
    assert schema.response_fields("FindCoordinator", 4) == ("throttle_time_ms", "coordinators")


def test_describe_groups_authorized_operations_default():
    out = schema.shape_response("DescribeGroups", 3, {"groups": [{"group_id": "g"}]})
    assert out["groups"][0]["authorized_operations"] == -2 ** 31
