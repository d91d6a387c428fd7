"""The core's promises: pure, deterministic, configurable by Kafka names, frozen values."""

import ast
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from paths import ROOT

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.core import ConfigError, CoordinatorConfig, commands, events
from groupcoord.core.coordinator import partition_for

CORE = ROOT / "core"
FORBIDDEN = {"time", "datetime", "uuid", "random", "secrets", "logging", "socket", "asyncio",
             "threading", "multiprocessing", "os", "io", "pathlib", "subprocess", "select", "signal"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_imports_only_the_standard_library_and_attrs(path):
    imported = _imports(path)
    allowed_third_party = {"attrs"} | ({"transitions"} if path.name == "diagram.py" else set())
    stdlib = set(sys.stdlib_module_names)
    assert not (imported & FORBIDDEN) - ({"pathlib"} if path.name == "diagram.py" else set()), imported & FORBIDDEN
    assert imported <= stdlib | allowed_third_party | {"__future__"}, imported - stdlib


def test_importing_the_core_pulls_in_no_io_or_clock_modules():
    # attrs itself loads some of these; what the core adds on top must be none of them.
    code = ("import sys, attrs; before = set(sys.modules); import groupcoord.core; "
            "bad = {'socket','asyncio','threading','uuid','random','logging','transitions','time'} "
            "& (set(sys.modules) - before); print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _script(driver):
    """A rebalance with a static member, a failed write and expiry; returns every command."""
    log = []
    driver.observer = lambda event, cmds: log.append((event, tuple(cmds)))

    def send(api, version, body, rid, client="c"):
        driver.dispatch(request_event(api, version, body, request_id=rid, now_ms=driver.now_ms,
                                      client_id=client, new_member_uuid=driver.new_uuid()))

    join = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    send("JoinGroup", 9, dict(join, group_instance_id="a"), 1)
    send("JoinGroup", 4, join, 2)
    send("JoinGroup", 4, dict(join, member_id=driver.responses[2].member_id), 3)
    driver.advance(3000)
    driver.advance(3000)
    leader = driver.responses[1]
    driver.fail_next_write("NOT_LEADER_OR_FOLLOWER")
    send("SyncGroup", 5, {"group_id": "g", "generation_id": leader.generation_id, "member_id": leader.member_id,
                          "group_instance_id": "a", "assignments": []}, 4)
    driver.advance(60_000)
    return log


def test_same_input_same_output():
    first, second = _script(Driver()), _script(Driver())
    assert first == second
    assert len(first) > 10


def test_values_are_frozen():
    response = commands.HeartbeatResponse(0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        response.error_code = 1
    driver = Driver()
    _script(driver)
    group = driver.coordinator.group("g")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        group.generation_id = 99
    with pytest.raises(TypeError):
        group.members["x"] = None


def test_config_by_kafka_names_with_defaults():
    config = CoordinatorConfig.from_kafka({"group.max.size": "10", "group.initial.rebalance.delay.ms": 0})
    assert config.group_max_size == 10 and config.group_initial_rebalance_delay_ms == 0
    assert config.group_min_session_timeout_ms == 6000 and config.offsets_retention_minutes == 10080
    assert CoordinatorConfig.from_kafka({}).to_kafka()["offsets.topic.num.partitions"] == 50


@pytest.mark.parametrize("settings, named", [
    ({"group.max.size": 0}, "group.max.size"),
    ({"group.max.size": "many"}, "group.max.size"),
    ({"group.max.size": True}, "group.max.size"),
    ({"offsets.retention.minutes": 0}, "offsets.retention.minutes"),
    ({"group.min.session.timeout.ms": 7000, "group.max.session.timeout.ms": 6000}, "group.max.session.timeout.ms"),
    ({"group.mx.size": 3}, "group.mx.size"),
])
def test_invalid_config_is_refused_naming_the_setting(settings, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        CoordinatorConfig.from_kafka(settings)


def test_partition_for_matches_java_string_hashcode():
    # Java: "group".hashCode() == 98629247; "" -> 0; "my-group".hashCode() == -1906497762, and
    # Kafka 4's Utils.abs is Math.abs (not n & 0x7fffffff, as in old Kafka); Integer.MIN_VALUE
    # ("polygenelubricants".hashCode()) maps to 0.
    assert partition_for("group", 2**31 - 1) == 98629247 % (2**31 - 1)
    assert partition_for("", 50) == 0
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("\u00e9t\u00e9-\U0001f600", 1 << 30) == _java_abs_hash("\u00e9t\u00e9-\U0001f600") % (1 << 30)


def _java_abs_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units, then Kafka's Utils.abs, computed independently."""
    units = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (31 * h + u) % (1 << 32)
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if signed == -(1 << 31) else abs(signed)


def test_every_request_kind_has_an_event_and_every_event_is_handled():
    from groupcoord.adapters.protocol import schema
    from groupcoord.core.coordinator import Coordinator

    assert set(events.REQUEST_TYPES) == set(schema.API_NAMES)
    handled = set(Coordinator()._handlers)
    assert set(events.REQUEST_TYPES.values()) <= handled
    assert {events.TimerFired, events.WriteCompleted, events.WriteFailed, events.LoadPartition,
            events.UnloadPartition} <= handled


_SYNC_TIMEOUT_RUN = """
from groupcoord.core.config import CoordinatorConfig
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.protocol.translate import request_event

driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0))
out = []
for n in range(8):  # eight members join; none of them syncs, so the sync timer removes them all
    join = {"group_id": "g", "member_id": "", "session_timeout_ms": 30000, "rebalance_timeout_ms": 5000,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    out += driver.dispatch(request_event("JoinGroup", 3, join, request_id=f"r{n}", now_ms=driver.now_ms,
                                         client_id=f"c{n}", new_member_uuid=driver.new_uuid()))
out += driver.advance(1)
out += driver.advance(5000)
print(repr(out))
"""


def test_output_does_not_depend_on_string_hashing():
    # Same input, same output, also across processes: nothing may follow set iteration order,
    # which changes with PYTHONHASHSEED (the sync timeout used to cancel heartbeats in set order).
    import os
    import subprocess
    import sys

    runs = [subprocess.run([sys.executable, "-c", _SYNC_TIMEOUT_RUN], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}) for seed in (1, 2, 3, 4)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert "CancelTimer" in runs[0].stdout and runs[0].stdout.count("HeartbeatTimer") >= 16
    assert len({r.stdout for r in runs}) == 1
