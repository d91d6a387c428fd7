"""``verify`` on consumer groups (KIP-848): recordings made by the core itself (its answers, the
members reporting what they were given as a client does), then changed as a broker might
answer: the topics image taken from the recording's Metadata answers (inconclusive without
it), member ids a v0 broker chose, hidden session timers, a broker's own assignor's legal
choice taken where no member named one, and the invariants checked whatever the target (no
partition given before its owner released it; epochs)."""

from __future__ import annotations

import uuid

import attrs

from groupcoord.adapters.observe import trace
from groupcoord.adapters.verify import from_core, observed, run
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE, Settings
from groupcoord.core.config import CoordinatorConfig

T = str(uuid.UUID(int=0x51))
CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_consumer_session_timeout_ms=10_000,
                           group_consumer_heartbeat_interval_ms=1_000)
OWNED_SIG = ('ConsumerGroupHeartbeat v1 assignment: "partitions their owners released" vs "a partition another member '
             'still owns"')


def heartbeat(member_id: str, epoch: int, owned, join: bool = False, assignor: str | None = None) -> dict:
    return {"group_id": "g", "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30_000 if join else -1, "subscribed_topic_names": ["t"] if join else None,
            "subscribed_topic_regex": None, "server_assignor": assignor if join else None,
            "topic_partitions": owned}


class Session:
    """Members heartbeating through the core (``from_core.observe``, run again over the whole
    prefix at each step: the core is deterministic), each reporting what it was last given."""

    def __init__(self, version: int = 1, topics=(("t", T, 4),), assignor: str | None = None) -> None:
        self.version, self.topics, self.assignor = version, topics, assignor
        self.requests: list[tuple] = []
        self.members: dict[str, dict] = {}
        self.obs: list = []
        self.changes: tuple = ()  # (time ms, image) the core's topics image changes at

    def _send(self, t: int, name: str, body: dict) -> dict:
        conn = sorted(self.members).index(name) + 1 if name in self.members else len(self.members) + 1
        if self.version == 0:
            body.pop("subscribed_topic_regex")
        self.requests.append((t, conn, "ConsumerGroupHeartbeat", self.version, body, name))
        self.obs = from_core.observe(self.requests, CONFIG, topics=self.topics, topic_changes=self.changes)
        return next(o for o in self.obs if o.index == len(self.requests)).response

    def join(self, t: int, name: str) -> dict:
        mid = "" if self.version == 0 else f"id-{name}"
        answer = self._send(t, name, heartbeat(mid, 0, [], join=True, assignor=self.assignor))
        self.members[name] = {"id": answer["member_id"], "epoch": answer["member_epoch"], "owned": []}
        self._given(name, answer)
        return answer

    def beat(self, t: int, name: str) -> dict:
        m = self.members[name]
        answer = self._send(t, name, heartbeat(m["id"], m["epoch"], m["owned"]))
        if answer and answer["error_code"] == 0:
            m["epoch"] = answer["member_epoch"]
            self._given(name, answer)
        return answer

    def leave(self, t: int, name: str) -> dict:
        m = self.members.pop(name)
        return self._send(t, name, heartbeat(m["id"], -1, None))

    def _given(self, name: str, answer: dict) -> None:
        if answer.get("assignment") is not None:
            self.members[name]["owned"] = [{"topic_id": uuid.UUID(t["topic_id"]), "partitions": t["partitions"]}
                                           for t in answer["assignment"]["topic_partitions"]]

    def recording(self, path, obs=None, topics: bool = True):
        observed.dump(obs if obs is not None else self.obs, path)
        if topics:
            writer_topics(path, self.topics)
        return path


def writer_topics(path, topics, at_us: int = 500_000) -> None:
    """A Metadata answer listing ``topics``, as ``groupcoord record`` writes it."""
    record = {"conn": 9, "broker": -1, "recv_us": at_us - 10, "send_us": at_us, "api": "Metadata", "api_key": 3,
              "version": 12, "correlation_id": 1, "client_id": "c", "all": True, "asked": [],
              "topics": [{"name": n, "topic_id": tid, "partitions": count, "error_code": 0} for n, tid, count in topics]}
    with open(path / trace.TOPICS, "a", encoding="utf-8") as f:
        f.write(trace.dumps(record) + "\n")


def settings() -> Settings:
    return Settings(config=CONFIG, from_birth=False)


def verdict_of(path):
    verdicts, _ = run.verify_plain(str(path), settings())
    (v,) = verdicts
    return v


def two_members() -> Session:
    s = Session()
    s.join(1_000, "a")
    s.beat(2_000, "a")
    s.join(2_500, "b")
    for t in range(3_000, 8_000, 1_000):
        s.beat(t, "a")
        s.beat(t + 100, "b")
    return s


def test_two_members_sharing_a_topic_and_one_leaving_conform(tmp_path):
    s = two_members()
    assert sorted(p for m in s.members.values() for t in m["owned"] for p in t["partitions"]) == [0, 1, 2, 3]
    s.leave(8_500, "a")
    s.beat(9_000, "b")
    s.beat(10_000, "b")
    assert s.members["b"]["owned"][0]["partitions"] == [0, 1, 2, 3]
    v = verdict_of(s.recording(tmp_path / "rec"))
    assert v.verdict == CONFORMS, v


def test_member_ids_a_v0_broker_chose_are_mapped(tmp_path):
    s = Session(version=0)
    s.join(1_000, "a")
    s.join(1_500, "b")
    for t in range(2_000, 5_000, 1_000):
        s.beat(t, "a")
        s.beat(t + 100, "b")
    # the broker's ids are its own: another run of it chose others
    renamed = {m["id"]: str(uuid.uuid4()) for m in s.members.values()}

    def rename(body):
        return None if body is None else {**body, "member_id": renamed.get(body.get("member_id"), body.get("member_id"))}
    obs = [attrs.evolve(o, request=rename(o.request), response=rename(o.response)) for o in s.obs]
    v = verdict_of(s.recording(tmp_path / "rec", obs))
    assert v.verdict == CONFORMS, v


def test_a_silent_member_fenced_by_its_session_timer_conforms(tmp_path):
    s = two_members()
    # a goes silent; b's heartbeats past a's session (10 s) find a fenced, b takes everything
    for t in range(9_000, 24_000, 1_000):
        s.beat(t, "b")
    assert s.members["b"]["owned"][0]["partitions"] == [0, 1, 2, 3]
    v = verdict_of(s.recording(tmp_path / "rec"))
    assert v.verdict == CONFORMS, v


def _given_early(s: Session):
    """b's first answer also gives it a partition a still owns (a has not revoked it)."""
    obs = list(s.obs)
    first_b = next(k for k, o in enumerate(obs) if o.client_id == "b")
    answer = dict(obs[first_b].response)
    answer["assignment"] = {"topic_partitions": [{"topic_id": T, "partitions": [3]}]}
    obs[first_b] = attrs.evolve(obs[first_b], response=answer)
    return obs


def test_a_partition_given_before_its_owner_released_it_diverges(tmp_path):
    s = Session()
    s.join(1_000, "a")
    s.beat(2_000, "a")
    s.join(2_500, "b")
    assert s.obs[-1].response["assignment"] == {"topic_partitions": []}  # a still owns all four
    v = verdict_of(s.recording(tmp_path / "rec", _given_early(s)))
    assert v.verdict == DIVERGES, v
    assert run.signature_of(v) == OWNED_SIG, v
    assert "still owns it" in v.detail


def test_another_legal_target_is_the_brokers_choice_when_no_member_named_an_assignor(tmp_path):
    s = Session()
    s.join(1_000, "a")
    s.beat(2_000, "a")
    s.join(2_500, "b")
    for t in range(3_000, 8_000, 1_000):
        s.beat(t, "a")
        s.beat(t + 100, "b")
    # the same session under another assignor: a keeps 1 and 3, b gets 0 and 2 (the core's gives
    # b 2 and 3): every answer naming those partitions swapped
    swap = {3: 0, 0: 3}
    a_id = s.members["a"]["id"]

    def swapped(body, mine):
        if not body:
            return body
        out = dict(body)
        for key in ("assignment",):
            if out.get(key):
                out[key] = {"topic_partitions": [{**t, "partitions": sorted(swap.get(p, p) for p in t["partitions"])}
                                                 for t in out[key]["topic_partitions"]]}
        if out.get("topic_partitions") and mine:
            out["topic_partitions"] = [{**t, "partitions": sorted(swap.get(p, p) for p in t["partitions"])}
                                       for t in out["topic_partitions"]]
        return out
    changed = []
    for o in s.obs:
        after_b_joined = o.recv_us >= 2_500_000
        if not after_b_joined:
            changed.append(o)
            continue
        changed.append(attrs.evolve(o, request=swapped(o.request, True), response=swapped(o.response, True)))
    assert any(o.response != c.response for o, c in zip(s.obs, changed))
    v = verdict_of(s.recording(tmp_path / "rec", changed))
    assert v.verdict == CONFORMS, v
    assert any("the broker's choice of target taken" in step for step in v.steps), v.steps
    del a_id


def test_a_target_other_than_the_named_assignors_diverges(tmp_path):
    s = Session(assignor="uniform")
    s.join(1_000, "a")
    s.beat(2_000, "a")
    s.join(2_500, "b")
    s.beat(3_000, "a")  # a is told to revoke
    obs = list(s.obs)
    answer = dict(obs[-1].response)
    kept = answer["assignment"]["topic_partitions"][0]["partitions"]
    other = sorted(set(range(4)) - set(kept))
    answer["assignment"] = {"topic_partitions": [{"topic_id": T, "partitions": other}]}
    obs[-1] = attrs.evolve(obs[-1], response=answer)
    v = verdict_of(s.recording(tmp_path / "rec", obs))
    assert v.verdict == DIVERGES and run.signature_of(v).startswith(
        "ConsumerGroupHeartbeat v1 assignment.topic_partitions[].partitions"), v


def test_a_wrong_epoch_diverges(tmp_path):
    s = two_members()
    obs = list(s.obs)
    answer = dict(obs[-1].response)
    answer["member_epoch"] += 1
    obs[-1] = attrs.evolve(obs[-1], response=answer)
    v = verdict_of(s.recording(tmp_path / "rec", obs))
    assert v.verdict == DIVERGES and run.signature_of(v).startswith("ConsumerGroupHeartbeat v1 member_epoch:"), v


def test_without_the_topics_image_the_group_is_inconclusive(tmp_path):
    s = two_members()
    v = verdict_of(s.recording(tmp_path / "none", topics=False))
    assert v.verdict == INCONCLUSIVE and "no Metadata answers" in v.detail, v
    path = s.recording(tmp_path / "other")
    (path / trace.TOPICS).unlink()
    writer_topics(path, (("u", str(uuid.UUID(int=9)), 2),))
    v = verdict_of(path)
    assert v.verdict == INCONCLUSIVE and "subscribes to topic 't'" in v.detail, v


def test_a_topic_grown_during_the_recording_is_searched_for(tmp_path):
    s = two_members()
    # the topic grows to 6 partitions at 8.2 s: the core sees it at the next heartbeat
    s.changes = ((8_200, (("t", T, 6),)),)
    for t in range(9_000, 14_000, 1_000):
        s.beat(t, "a")
        s.beat(t + 100, "b")
    assert sorted(p for m in s.members.values() for t in m["owned"] for p in t["partitions"]) == list(range(6))
    path = s.recording(tmp_path / "rec")  # an answer at 0.5 s shows 4 partitions
    writer_topics(path, (("t", T, 6),), at_us=10_500_000)  # one at 10.5 s shows 6
    v = verdict_of(path)
    assert v.verdict == CONFORMS, v
    assert any(step.startswith("topics image: t id") for step in v.steps), v.steps
    # without the later answer the recording does not show the change: the search finds no execution
    path = s.recording(tmp_path / "unseen")
    assert verdict_of(path).verdict == DIVERGES
