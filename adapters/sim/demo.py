"""``groupcoord demo``: simulated consumers form a group, rebalance and lose a member.

Runs the real core through the Driver (manual clock, in-memory storage) and narrates each
response and state change. Until the wire server exists this is the README's main command.
"""

from __future__ import annotations

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.core.classic.subscription import encode_assignment, encode_subscription
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

TOPIC = "orders"
SESSION_MS, REBALANCE_MS = 10_000, 30_000


def _assignment(partitions: list[int]) -> bytes:
    """A ConsumerProtocolAssignment v0 for one topic."""
    return encode_assignment([(TOPIC, p) for p in partitions], version=0)


def _range_assign(member_ids: list[str], partitions: int) -> dict[str, list[int]]:
    ordered = sorted(member_ids)
    share, extra = divmod(partitions, len(ordered))
    out, start = {}, 0
    for i, mid in enumerate(ordered):
        count = share + (i < extra)
        out[mid] = list(range(start, start + count))
        start += count
    return out


class Demo:
    def __init__(self, partitions: int) -> None:
        self.driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1))
        self.partitions = partitions
        self.members: dict[str, str] = {}  # client name -> member id
        self.generation = -1
        self.last_state = None
        self.rid = 0

    def say(self, text: str) -> None:
        print(f"t={self.driver.now_ms / 1000:>6.1f}s  {text}")

    def send(self, api: str, version: int, body: dict, client: str):
        self.rid += 1
        event = request_event(api, version, body, request_id=(client, self.rid), now_ms=self.driver.now_ms,
                              client_id=client, new_member_uuid=self.driver.new_uuid())
        self.driver.dispatch(event)
        self.report_state()
        return (client, self.rid)

    def report_state(self) -> None:
        group = self.driver.coordinator.group("demo")
        state = (group.state.value, group.generation_id) if group else ("absent", -1)
        if state != self.last_state:
            self.say(f"group is {state[0]} (generation {state[1]})")
            self.last_state = state

    def join(self, client: str) -> object:
        body = {"group_id": "demo", "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": REBALANCE_MS,
                "member_id": self.members.get(client, ""), "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription([TOPIC], version=0)}]}
        rid = self.send("JoinGroup", 9, body, client)
        response = self.driver.responses.get(rid)
        if response is not None and response.error_code == Error.MEMBER_ID_REQUIRED:
            self.members[client] = response.member_id
            self.say(f"{client} is told its member id {response.member_id} (MEMBER_ID_REQUIRED) and rejoins")
            body["member_id"] = response.member_id
            rid = self.send("JoinGroup", 9, body, client)
        return rid

    def finish_joins(self, pending: dict[str, object]) -> None:
        leader_members = None
        for client, rid in pending.items():
            response = self.driver.responses[rid]
            self.generation = response.generation_id
            role = "leader" if response.leader == response.member_id else "follower"
            self.say(f"{client} joined generation {response.generation_id} as {role} ({response.protocol_name})")
            if response.members:
                leader_members = (client, [m.member_id for m in response.members])
        leader, member_ids = leader_members
        plan = _range_assign(member_ids, self.partitions)
        names = {mid: c for c, mid in self.members.items()}
        for client, mid in self.members.items():
            if mid not in member_ids:
                continue
            assignments = [{"member_id": m, "assignment": _assignment(p)} for m, p in plan.items()] \
                if client == leader else []
            self.send("SyncGroup", 5, {"group_id": "demo", "generation_id": self.generation, "member_id": mid,
                                       "protocol_type": "consumer", "protocol_name": "range",
                                       "assignments": assignments}, client)
        for mid, parts in plan.items():
            self.say(f"  {names.get(mid, mid)} owns {TOPIC} partitions {parts}")

    def heartbeats(self, clients: list[str]) -> None:
        for client in clients:
            rid = self.send("Heartbeat", 4, {"group_id": "demo", "generation_id": self.generation,
                                             "member_id": self.members[client]}, client)
            error = Error(self.driver.responses[rid].error_code)
            if error is not Error.NONE:
                self.say(f"{client}'s heartbeat: {error.name}")

    def advance(self, ms: int) -> None:
        self.driver.advance(ms)
        self.report_state()


def run_demo(members: int = 3, partitions: int = 6) -> int:
    if members < 2:
        print("the demo needs at least 2 members")
        return 2
    demo = Demo(partitions)
    clients = [f"consumer-{i}" for i in range(1, members + 1)]
    print(f"{members} consumers subscribe to {TOPIC} ({partitions} partitions) in group 'demo'\n")
    pending = {c: demo.join(c) for c in clients}
    demo.say("waiting for group.initial.rebalance.delay.ms (3 s, extended while members arrive)")
    demo.advance(3000)
    demo.advance(3000)
    demo.finish_joins(pending)

    newcomer = f"consumer-{members + 1}"
    print(f"\n{newcomer} arrives")
    demo.advance(2000)
    joining = {newcomer: demo.join(newcomer)}
    demo.heartbeats(clients)  # REBALANCE_IN_PROGRESS tells them to rejoin
    joining.update({c: demo.join(c) for c in clients})
    demo.finish_joins(joining)
    clients.append(newcomer)

    leaver = clients.pop(0)
    print(f"\n{leaver} shuts down cleanly (LeaveGroup)")
    rid = demo.send("LeaveGroup", 5, {"group_id": "demo", "members": [{"member_id": demo.members[leaver]}]}, leaver)
    demo.say(f"{leaver} left: {Error(demo.driver.responses[rid].error_code).name}")
    del demo.members[leaver]
    demo.heartbeats(clients)
    demo.finish_joins({c: demo.join(c) for c in clients})

    crashed = clients.pop()
    print(f"\n{crashed} crashes: no more heartbeats; the others keep beating every 3 s")
    for _ in range(4):
        demo.advance(3000)
        demo.heartbeats(clients)
    demo.say(f"{crashed}'s session ({SESSION_MS // 1000} s) expired; it was removed")
    del demo.members[crashed]
    demo.finish_joins({c: demo.join(c) for c in clients})
    group = demo.driver.coordinator.group("demo")
    print(f"\nfinal: {group.state.value}, generation {group.generation_id}, {len(group.members)} members")
    return 0
