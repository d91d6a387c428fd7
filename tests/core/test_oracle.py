"""The oracle of oracle.py: its Kafka facts on Kafka's own examples, it fails when the core answers
what Kafka would not."""

from collections import Counter, namedtuple

import oracle

from groupcoord.adapters.runtime.driver import Driver
from groupcoord.core.classic import joining
from groupcoord.core.classic.draft import GroupDraft
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error
from groupcoord.core.partitioning import partition_for

Voter = namedtuple("Voter", "protocols")


def voters(*preferences):
    return [Voter(tuple((name, b"") for name in names)) for names in preferences]


def test_the_vote_on_kafkas_examples():
    """ClassicGroupTest.testSelectProtocol and the split vote of issue #16."""
    assert oracle.kafka_vote(voters(["range", "roundrobin"], ["roundrobin", "range"])) == {"range", "roundrobin"}
    assert oracle.kafka_vote(voters(["range", "roundrobin"], ["roundrobin", "range"],
                                    ["roundrobin", "range"])) == {"roundrobin"}
    assert oracle.kafka_vote(voters(["range", "roundrobin"], ["roundrobin", "foo"])) == {"roundrobin"}
    assert oracle.kafka_vote(voters(["range", "roundrobin"], ["range", "roundrobin"],
                                    ["roundrobin", "range"])) == {"range"}


def test_a_tied_vote_goes_to_the_name_kafkas_hashmap_iterates_first():
    """ClassicGroup.selectProtocol keeps the first of equal counts in a HashMap's order, which on
    a JDK is sticky, range, roundrobin (buckets 8, 9, 10 of 16), whoever voted first."""
    driver = Driver(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    for client, names in (("a", ("roundrobin", "range")), ("b", ("range", "roundrobin"))):
        driver.send("JoinGroup", join_body(*names), version=3, client_id=client)
    driver.advance(0)
    assert driver.coordinator.group("g").protocol_name == "range"
    group = GroupDraft(driver.coordinator.group("g"))
    assert group.select_protocol() == "range"


def test_java_lengths_and_partitions():
    assert [oracle.java_length(s) for s in ("", "abcde", "ééééé", "\U0001d11e")] == [0, 5, 5, 2]
    for group_id in ("g", "k", "h", "", "range", "é-ü", "x" * 300, "\U0001d11e", "polygenelubricants"):
        for partitions in (1, 2, 50):
            assert oracle.kafka_partition(group_id, partitions) == partition_for(group_id, partitions)
    assert oracle.kafka_partition("range", 50) == 108280125 % 50  # "range".hashCode() in Java


def drive(config: CoordinatorConfig):
    """A Driver whose every event the oracle checks; returns (driver, send, findings, oracle)."""
    driver = Driver(config)
    checker, found, seen = oracle.KafkaOracle(), [], [driver.coordinator.groups()]

    def observe(event, commands):
        after = driver.coordinator.groups()
        found.extend(checker.check(seen[-1], after, event, commands, driver.coordinator))
        seen.append(after)

    driver.observer = observe

    def send(api, body, version=3, client="c"):
        return driver.responses.get(driver.send(api, body, version=version, client_id=client))

    return driver, send, found, checker


def join_body(*names, protocol_type="consumer", member_id="", rebalance=3000):
    return {"group_id": "g", "member_id": member_id, "session_timeout_ms": 10000, "rebalance_timeout_ms": rebalance,
            "protocol_type": protocol_type, "protocols": [{"name": n, "metadata": b""} for n in names]}


CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)


def split_vote(send, driver):
    for names in (["roundrobin", "range"], ["range", "roundrobin"], ["range", "roundrobin"]):
        send("JoinGroup", join_body(*names))
    driver.advance(3000)


def test_the_unchanged_core_agrees():
    driver, send, found, _ = drive(CONFIG)
    split_vote(send, driver)
    assert driver.coordinator.group("g").protocol_name == "range"
    assert found == []


def test_a_vote_for_the_fewest_is_caught(monkeypatch):
    def fewest(g):
        return min(Counter(m.vote(g.candidate_protocols()) for m in g.members.values()).items(),
                   key=lambda kv: kv[1])[0]

    monkeypatch.setattr(GroupDraft, "select_protocol", fewest)
    driver, send, found, _ = drive(CONFIG)
    split_vote(send, driver)
    assert any(f.startswith("oracle_vote:") and "Kafka elects ['range']" in f for f in found), found


def test_a_short_new_member_timeout_is_caught(monkeypatch):
    monkeypatch.setattr(joining, "NEW_MEMBER_JOIN_TIMEOUT_MS", 30_000)
    driver, send, found, _ = drive(CONFIG)
    send("JoinGroup", join_body("range"))
    assert any(f.startswith("oracle_timer:") and "[300000] ms" in f for f in found), found


def test_another_protocol_type_is_refused_while_the_group_rebalances_without_members():
    """Kafka's ClassicGroup.supportsProtocols applies the Empty rule by state (isInState(EMPTY)),
    not by member count: a PreparingRebalance group whose members all left keeps its protocol
    type, and a member of another type gets INCONSISTENT_GROUP_PROTOCOL until the join phase
    ends."""
    driver, send, _, _ = drive(CONFIG)
    send("JoinGroup", join_body("range", protocol_type="connect"), version=1)
    send("LeaveGroup", {"group_id": "g", "member_id": driver.coordinator.group("g").leader_id}, version=0)
    answer = send("JoinGroup", join_body("range"), version=4)
    assert answer.error_code is Error.INCONSISTENT_GROUP_PROTOCOL
