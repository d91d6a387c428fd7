"""Which coordinator process owns which offsets partition, agreed through the broker.

The ``groupcoord serve`` processes sharing a records topic form one classic group on the
broker (default ``groupcoord-coordinators``, protocol type ``groupcoord``), spoken directly
with kio (``kafka_client``):

* **Join metadata** (JSON): this process's endpoint (node id, host, port), the partitions it
  holds now, and the newest ownership map it knows with that map's generation.
* **The leader's assignment** (JSON, the same for every member): the map partition -> member
  id, every member's endpoint, and the members that must rejoin. Moves are cooperative: a
  partition that some live member still holds (by its own report or by the newest map) is
  never given to another member in the same generation. To rebalance, the leader leaves it
  unassigned; its holder unloads it, waits until its writes to the partition have answers,
  and rejoins; the next generation gives it to a member below its share. A partition whose
  holder is no longer in the group (it died, or its lease ran out) is free at once.
* **Lease.** Every successful JoinGroup, SyncGroup or Heartbeat renews a lease to
  ``send time + session timeout - margin``. The broker evicts a member only after a session
  timeout without requests, so while the lease holds no other member can have been given
  this member's partitions. When it runs out (a stalled process, a lost broker), the process
  unloads every partition at once and stops acknowledging writes
  (``BrokerStorage.lease``). After an UNKNOWN_MEMBER_ID it also unloads everything and joins
  again as a new member.
* **FindCoordinator** is answered from the map (``owner_of``): the owner's node id, host and
  port; COORDINATOR_NOT_AVAILABLE while a partition has no owner.

The server's partitions (``partitions.Partitions``) carry the decisions out:
``assign_partitions(set)`` (start loading), ``await revoke_partitions(set)`` (unload, wait
for the partitions' writes) and ``fence(reason)`` (unload everything now).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from groupcoord.adapters.client.kafka_client import KafkaClient, KafkaError, cancel_and_wait, parse_bootstrap
from groupcoord.adapters.wire import broker_apis as apis

GROUP = "groupcoord-coordinators"
PROTOCOL_TYPE = "groupcoord"
PROTOCOL = "partitions-v1"
FORMAT = 1


class Ownership:
    def __init__(self, bootstrap: str, partitions: int, *, group: str = GROUP, session_ms: int = 10_000,
                 heartbeat_ms: int | None = None, client_id: str = "groupcoord-coordinator",
                 request_timeout_ms: int = 10_000, log: Any = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.partitions = partitions
        self.group = group
        self.session_ms = session_ms
        self.heartbeat_s = (heartbeat_ms if heartbeat_ms is not None else max(100, session_ms // 6)) / 1000
        self.margin_s = min(1.0, session_ms / 5000)
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.log = log or (lambda *a, **k: None)
        self.node: apis.Node | None = None
        self.serving: Any = None  # the server's Partitions, given by start()
        self.member_id = ""
        self.generation = -1
        self.map_generation = -1
        self.owners: dict[int, str] = {}  # the newest map: partition -> member id
        self.nodes: dict[str, apis.Node] = {}  # member id -> endpoint
        self.held: set[int] = set()  # partitions this process holds (loading or loaded)
        self._lease_until = 0.0
        self._lease_timer: asyncio.TimerHandle | None = None
        self._client: KafkaClient | None = None
        self._task: asyncio.Task | None = None
        self._rejoin = asyncio.Event()
        self._stopping = False
        self.stats = {"rebalances": 0, "fenced": 0}

    # --- what the server asks -----------------------------------------------------------------

    def lease(self) -> float:
        """Loop time until which writes may be acknowledged."""
        return self._lease_until

    def owner_of(self, partition: int) -> apis.Node | None:
        if partition in self.held and self.node is not None:
            return self.node
        member = self.owners.get(partition)
        if member is None or member == self.member_id:  # ours in the map, but not held (yet)
            return None
        return self.nodes.get(member)

    def peers(self) -> list[apis.Node]:
        out = {n.node_id: n for n in self.nodes.values()}
        if self.node is not None:
            out[self.node.node_id] = self.node
        return [out[k] for k in sorted(out)]

    def describe(self) -> dict:
        return {"member_id": self.member_id, "generation": self.generation, "held": sorted(self.held),
                "owners": {str(p): self.nodes[m].node_id if m in self.nodes else None
                           for p, m in sorted(self.owners.items())}}

    # --- life cycle ------------------------------------------------------------------------------

    async def start(self, serving: Any, node: apis.Node) -> None:
        self.serving = serving
        self.node = node
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Unload every partition (waiting for its writes), leave the group, disconnect."""
        self._stopping = True
        if self._task is not None:
            await cancel_and_wait(self._task)
        if self._lease_timer is not None:
            self._lease_timer.cancel()
        if self.held:
            held, self.held = set(self.held), set()
            await self.serving.revoke_partitions(held)
        await self._disconnect()  # (it may hold a JoinGroup the broker parked)
        if self.member_id:  # leave at once, so that the others take the partitions over now
            client = None
            try:
                client = await asyncio.wait_for(self._connect_coordinator(), 3)
                await client.request(13, {"group_id": self.group, "member_id": self.member_id,
                                          "members": [{"member_id": self.member_id, "group_instance_id": None,
                                                       "reason": "shutdown"}]}, client.version(13), timeout=3)
            except (OSError, asyncio.TimeoutError, KafkaError, ConnectionError):
                pass
            finally:
                if client is not None:
                    await client.close()

    # --- the member loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._rejoin = asyncio.Event()
        heartbeats = loop.create_task(self._heartbeats())
        backoff = 0.05
        try:
            while not self._stopping:
                try:
                    await self._round()
                    backoff = 0.05
                except asyncio.CancelledError:
                    raise
                except (OSError, asyncio.TimeoutError, KafkaError, ConnectionError, ValueError) as e:
                    self.log("warning", "ownership_retry", error=f"{type(e).__name__}: {e}", backoff_s=backoff)
                    await self._disconnect()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
        finally:
            heartbeats.cancel()
            try:
                await heartbeats
            except BaseException:
                pass

    async def _connect_coordinator(self) -> KafkaClient:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                boot = await KafkaClient.connect(host, port, self.client_id, timeout=self.request_timeout)
            except (OSError, asyncio.TimeoutError, KafkaError) as e:
                last = e
                continue
            try:
                v = boot.version(10)
                r = await boot.request(10, {"key_type": 0, "key": self.group, "coordinator_keys": [self.group]}, v,
                                       timeout=self.request_timeout)
                entry = r["coordinators"][0] if v >= 4 else r
                if entry["error_code"]:
                    raise KafkaError(f"FindCoordinator({self.group}): error {entry['error_code']}", entry["error_code"])
                if (entry["host"], entry["port"]) == (host, port):
                    return boot
                await boot.close()
                return await KafkaClient.connect(entry["host"], entry["port"], self.client_id,
                                                 timeout=self.request_timeout)
            except BaseException:
                await boot.close()
                raise
        raise KafkaError(f"cannot reach any bootstrap server {self.bootstrap}: {last}")

    async def _coordinator(self) -> KafkaClient:
        if self._client is None or self._client._reader_task is None or self._client._reader_task.done():
            await self._disconnect()
            self._client = await self._connect_coordinator()
        return self._client

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _round(self) -> None:
        """One generation: join, sync, apply the plan, then wait until a rebalance is due."""
        loop = asyncio.get_running_loop()
        self._rejoin.clear()
        client = await self._coordinator()
        sent = loop.time()
        r = await client.request(11, {
            "group_id": self.group, "session_timeout_ms": self.session_ms, "rebalance_timeout_ms": self.session_ms,
            "member_id": self.member_id, "group_instance_id": None, "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": PROTOCOL, "metadata": self._metadata()}], "reason": None},
            client.version(11), timeout=self.request_timeout + self.session_ms / 1000)
        code = r["error_code"]
        if code == 79:  # MEMBER_ID_REQUIRED
            self.member_id = r["member_id"]
            return
        if code == 25:
            self._lost("the broker no longer knows this member (UNKNOWN_MEMBER_ID on JoinGroup)")
            return
        if code in (27, 22):
            return
        if code in (14, 15, 16):
            await self._disconnect()
            await asyncio.sleep(0.1)  # backoff before asking for the coordinator again
            return
        if code:
            raise KafkaError(f"JoinGroup({self.group}): error {code}", code)
        self.member_id = r["member_id"]
        generation = r["generation_id"]
        self._renew(sent)
        assignments = []
        if r["leader"] == self.member_id:
            assignments = [{"member_id": mid, "assignment": data}
                           for mid, data in self._assign(r["members"], generation).items()]
        sent = loop.time()
        s = await client.request(14, {"group_id": self.group, "generation_id": generation, "member_id": self.member_id,
                                      "group_instance_id": None, "protocol_type": PROTOCOL_TYPE,
                                      "protocol_name": PROTOCOL, "assignments": assignments},
                                 client.version(14), timeout=self.request_timeout + self.session_ms / 1000)
        if s["error_code"] == 25:
            self._lost("UNKNOWN_MEMBER_ID on SyncGroup")
            return
        if s["error_code"] in (27, 22):
            return
        if s["error_code"]:
            raise KafkaError(f"SyncGroup({self.group}): error {s['error_code']}", s["error_code"])
        self._renew(sent)
        self.generation = generation
        self.stats["rebalances"] += 1
        if await self._apply(s["assignment"], generation):
            return
        self._rejoin.clear()  # only what the heartbeats see from now on counts
        await self._rejoin.wait()

    async def _heartbeats(self) -> None:
        """Heartbeats on their own connection, also while a JoinGroup is parked: every answer
        but UNKNOWN_MEMBER_ID means the broker saw this member alive when it got the request
        (Tansu refreshes a member's last contact on each of its requests), which renews the
        lease; REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION ask the member loop to rejoin."""
        loop = asyncio.get_running_loop()
        client: KafkaClient | None = None
        try:
            while not self._stopping:
                await asyncio.sleep(self.heartbeat_s)  # the heartbeat interval
                member_id = self.member_id
                if not member_id:
                    continue
                try:
                    if client is None or client._reader_task is None or client._reader_task.done():
                        if client is not None:
                            await client.close()
                        client = await self._connect_coordinator()
                    sent = loop.time()
                    h = await client.request(12, {"group_id": self.group, "generation_id": self.generation,
                                                  "member_id": member_id, "group_instance_id": None},
                                             client.version(12), timeout=self.request_timeout)
                except (OSError, asyncio.TimeoutError, KafkaError, ConnectionError) as e:
                    self.log("warning", "ownership_heartbeat_failed", error=f"{type(e).__name__}: {e}")
                    if client is not None:
                        await client.close()
                        client = None
                    continue
                code = h["error_code"]
                if member_id != self.member_id:
                    continue
                if code in (0, 27, 22):
                    self._renew(sent)
                    if code:
                        self._rejoin.set()
                elif code == 25:
                    self._lost("UNKNOWN_MEMBER_ID on Heartbeat")
                    self._rejoin.set()
                elif code in (14, 15, 16):
                    await client.close()
                    client = None
                else:
                    self.log("warning", "ownership_heartbeat_error", error_code=code)
        finally:
            if client is not None:
                await client.close()

    # --- lease ------------------------------------------------------------------------------------

    def _renew(self, sent: float) -> None:
        loop = asyncio.get_running_loop()
        self._lease_until = max(self._lease_until, sent + self.session_ms / 1000 - self.margin_s)
        if self._lease_timer is not None:
            self._lease_timer.cancel()
        self._lease_timer = loop.call_at(self._lease_until, self._lease_expired)

    def _lease_expired(self) -> None:
        self._lease_timer = None
        if asyncio.get_running_loop().time() < self._lease_until:
            self._lease_timer = asyncio.get_running_loop().call_at(self._lease_until, self._lease_expired)
            return
        if self.held:
            self.stats["fenced"] += 1
            self.log("warning", "ownership_lease_expired", held=sorted(self.held),
                     detail="no successful request to the broker's group coordinator within the session "
                            "timeout; unloading every partition")
            self.held = set()
            self.serving.fence("lease expired")
            self._rejoin.set()  # the partitions must be given out again (to this member or another)

    def _lost(self, reason: str) -> None:
        self.log("warning", "ownership_lost", reason=reason, held=sorted(self.held))
        self.member_id = ""
        self.generation = -1
        if self.held:
            self.stats["fenced"] += 1
            self.held = set()
            self.serving.fence(reason)

    # --- metadata, the leader's plan, applying it ---------------------------------------------------

    def _metadata(self) -> bytes:
        node = self.node
        return json.dumps({"v": FORMAT, "node": [node.node_id, node.host, node.port], "held": sorted(self.held),
                           "gen": self.map_generation, "owners": {str(p): m for p, m in self.owners.items()}},
                          separators=(",", ":")).encode()

    def _assign(self, members: list[dict], generation: int) -> dict[str, bytes]:
        """The leader: the next ownership map (see the module doc)."""
        metas: dict[str, dict] = {}
        for m in members:
            try:
                meta = json.loads(m["metadata"])
                if meta.get("v") != FORMAT:
                    raise ValueError("format")
            except (ValueError, TypeError):
                meta = {"node": None, "held": [], "gen": -1, "owners": {}}
            metas[m["member_id"]] = meta
        plan = plan_assignment({mid: set(m.get("held", [])) for mid, m in metas.items()},
                               max(metas.values(), key=lambda m: m.get("gen", -1)).get("owners", {}),
                               self.partitions)
        nodes = {}
        seen_ids: dict[int, str] = {}
        for mid, meta in metas.items():
            if meta.get("node"):
                node_id, host, port = meta["node"]
                nodes[mid] = [node_id, host, port]
                if node_id in seen_ids:
                    self.log("error", "ownership_duplicate_node_id", node_id=node_id, members=[seen_ids[node_id], mid],
                             detail="give every groupcoord serve process its own --node.id")
                seen_ids[node_id] = mid
        data = json.dumps({"v": FORMAT, "gen": generation, "owners": {str(p): m for p, m in plan["owners"].items()},
                           "nodes": nodes, "rejoin": sorted(plan["rejoin"])}, separators=(",", ":")).encode()
        return {mid: data for mid in metas}

    async def _apply(self, data: bytes, generation: int) -> bool:
        """Take the plan: unload what is no longer ours, start loading what is. True if this
        member must rejoin at once (it gave partitions up for others)."""
        plan = json.loads(data)
        owners = {int(p): m for p, m in plan["owners"].items()}
        nodes = {mid: apis.Node(n[0], n[1], n[2]) for mid, n in plan["nodes"].items()}
        mine = {p for p, m in owners.items() if m == self.member_id}
        revoke = self.held - mine
        if revoke:
            self.held -= revoke
            await self.serving.revoke_partitions(revoke)
        self.owners, self.nodes, self.map_generation = owners, nodes, plan["gen"]
        assign = mine - self.held
        if assign:
            self.held |= assign
            self.serving.assign_partitions(assign)
        self.log("info", "ownership", generation=generation, member_id=self.member_id, held=sorted(self.held),
                 assigned=sorted(assign), revoked=sorted(revoke),
                 unowned=sorted(set(range(self.partitions)) - set(owners)),
                 members=len(nodes))
        return self.member_id in plan.get("rejoin", ())


def plan_assignment(held: dict[str, set[int]], newest: dict, partitions: int) -> dict:
    """The leader's plan. ``held``: member id -> partitions it reports holding; ``newest``: the
    newest map known to any member (partition -> member id). Returns ``owners`` (partition ->
    member id) and ``rejoin`` (members that must give something up and rejoin).

    A partition claimed by exactly one present member stays with it unless that member is
    above its share; one claimed by several is left unassigned (each claimer gives it up);
    one claimed by nobody is free and goes to a member below its share. Shares differ by at
    most one; the larger ones go to members that already hold the most."""
    members = sorted(held)
    claims: dict[int, set[str]] = {}
    for mid, parts in held.items():
        for p in parts:
            claims.setdefault(p, set()).add(mid)
    for p, mid in newest.items():
        p = int(p)
        if mid in held:
            claims.setdefault(p, set()).add(mid)
    owners: dict[int, str] = {}
    rejoin: set[str] = set()
    kept: dict[str, list[int]] = {m: [] for m in members}
    for p, claimers in claims.items():
        if not 0 <= p < partitions:
            continue
        if len(claimers) == 1:
            kept[next(iter(claimers))].append(p)
        else:
            rejoin |= claimers
    if not members:
        return {"owners": {}, "rejoin": set()}
    base, extra = divmod(partitions, len(members))
    by_load = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_load)}
    for m in members:
        parts = sorted(kept[m])
        for p in parts[:quota[m]]:
            owners[p] = m
        if len(parts) > quota[m]:
            rejoin.add(m)  # gives the rest up; they are assigned in the next generation
    free = [p for p in range(partitions) if p not in claims]
    for m in sorted(members, key=lambda m: (len(kept[m]), m)):
        while free and sum(1 for o in owners.values() if o == m) < quota[m]:
            owners[free.pop(0)] = m
    return {"owners": owners, "rejoin": rejoin}
