-------------------------------- MODULE MC --------------------------------
(***************************************************************************)
(* Model values and bounds for TLC. Each MC*.cfg picks its constants from  *)
(* here; `groupcoord tla check` runs them all (tla/README.md).             *)
(***************************************************************************)
EXTENDS CoordinatorProps
CONSTANTS m1, m2, m3, m4, m5, i1, i2

\* A member's protocol list (its metadata: a consumer subscription to topic "t", version 0) ...
PA == << <<"range", "0x000000000001000174ffffffff">> >>
PB == << <<"range", "b">> >>     \* ... and the same protocol with other metadata, unreadable (a change)
\* Two protocol names with the same subscription (a consumer lists each assignor it supports): one
\* name only, the other only, and both in either order (split and tied votes; a member listing
\* only "roundrobin" shares no name with a group of PA's: INCONSISTENT_GROUP_PROTOCOL).
PR == << <<"roundrobin", "0x000000000001000174ffffffff">> >>
PRR == << <<"range", "0x000000000001000174ffffffff">>, <<"roundrobin", "0x000000000001000174ffffffff">> >>
PRRBack == << <<"roundrobin", "0x000000000001000174ffffffff">>, <<"range", "0x000000000001000174ffffffff">> >>
TwoNamesTieOrder == <<"range", "roundrobin">>  \* Java's HashMap order of the two (draft.java_hashmap_order)
MCSubscriptions == ("0x000000000001000174ffffffff" :> {"t"})
NoGroup == {None}
NoTieOrder == <<>>  \* one protocol name per configuration: no tied vote
NoKeys == <<>>      \* configurations without offsets
NoSubscriptions == <<>>  \* metadata nobody can read as a subscription
T0 == <<"t", 0>>    \* a key of the subscribed topic ...
U0 == <<"u", 0>>    \* ... and of another
MinusOne == -1
\* A stored member, with its rebalance and session timeouts.
StoredWith(id, inst, rto, sto) == [id |-> id, inst |-> inst, protos |-> PA, rto |-> rto, sto |-> sto, asg |-> "A"]
Stored(id, inst) == StoredWith(id, inst, 6000, 10000)

\* What the projection ignores: the responses that held results and writes will send. (The whole
\* previous state stays: a group copy kept for a failed write's undo holds it and puts it back.)
View == <<state, prevState, generation, protocolType, protocolName, leader, members, mem,
          pending, pendingSync, newMemberAdded, subs, offsets, committed, IF Reloads THEN stored ELSE 0, timers,
          [i \in 1..Len(writes) |-> writes[i].cbs], [i \in 1..Len(held) |-> held[i].wait], budget,
          \* with Reloads a write's records decide the log once it completes
          IF Reloads THEN [i \in 1..Len(writes) |-> writes[i].recs] ELSE 0>>

\* Symmetry: member ids and instance ids are interchangeable among themselves.
SymmOf(I, J) == {[x \in I \cup J |-> IF x \in I THEN p[x] ELSE q[x]] : p \in Permutations(I), q \in Permutations(J)}

\* For liveness: out and event decide nothing, so states that differ only in them are one.
LiveView == <<groupVars, offsetVars, IF Reloads THEN stored ELSE 0, timers, writes, held, budget>>

--------------------------------------------------------------------------
(* MC3: three members, static and dynamic, from an empty partition. No symmetry. *)
MC3Ids == {m1, m2, m3}
MC3Instances == {i1}
MC3Protocols == {PA}
MC3Bounds == generation <= 1 /\ Len(members) <= 3 /\ Len(writes) <= 1 /\ Len(held) <= 1

--------------------------------------------------------------------------
(* MC4: a stable group of four (one static) loaded from storage, three client requests, with
   symmetry: every expiry, rebalance and write outcome that follows. *)
MC4Ids == {m1, m2, m3, m4, m5}
MC4Instances == {i1}
MC4Protocols == {PA}
MC4Init == {[gen |-> 1, ptype |-> "consumer", pname |-> "range", leader |-> m1,
             members |-> <<Stored(m1, None), Stored(m2, i1), Stored(m3, None), Stored(m4, None)>>]}
MC4Bounds == generation <= 3 /\ Len(writes) <= 1 /\ Len(held) <= 1
MC4Symmetry == SymmOf(MC4Ids, MC4Instances)

--------------------------------------------------------------------------
(* MCLive: liveness under fair timers and writes; clients send a bounded number of requests. *)
MCLiveIds == {m1, m2, m3}
MCLiveInstances == {i1}
MCLiveProtocols == {PA}

--------------------------------------------------------------------------
(* MCOffsets: commits, fetches and deletions of two keys (one of the subscribed topic) against
   a loaded Stable group of two (one static) holding a committed offset, with every rebalance,
   expiry, write outcome and unload in between. *)
MCOffsetsIds == {m1, m2, m3}
MCOffsetsInstances == {i1}
MCOffsetsProtocols == {PA}
MCOffsetsKeys == <<T0, U0>>
MCOffsetsInit == {[gen |-> 1, ptype |-> "consumer", pname |-> "range", leader |-> m1,
                   members |-> <<Stored(m1, None), Stored(m2, i1)>>, offs |-> (U0 :> 1)]}
MCOffsetsBounds == Len(writes) <= 2 /\ Len(held) <= 1

--------------------------------------------------------------------------
(* MCFailover: MCOffsets' group and one key of it, with the partition unloaded (any prefix of the
   writes in flight durable) and loaded again from the log. *)
MCFailoverKeys == <<U0>>

--------------------------------------------------------------------------
(* MCGraph: the small configuration whose whole state graph is dumped and replayed against
   the core (every id and every choice, no VIEW, no symmetry). The loaded group's second
   member has longer timeouts than the requests carry: a rebalance timer is the longest of the
   members' (m2's 8000 until it leaves), each heartbeat timer its own member's session. *)
MCGraphIds == {m1, m2, m3}
MCGraphInstances == {i1}
MCGraphProtocols == {PA, PB}
MCGraphKeys == <<T0>>   \* subscribed by PA's members, not by an Empty group
MCGraphInit == {None,
                [gen |-> 2, ptype |-> "consumer", pname |-> None, leader |-> None, members |-> <<>>,
                 offs |-> (T0 :> 1)],
                [gen |-> 1, ptype |-> "consumer", pname |-> "range", leader |-> m1,
                 members |-> <<Stored(m1, None), StoredWith(m2, i1, 8000, 12000)>>]}

--------------------------------------------------------------------------
(* MCGraphWide: MCWide's inputs replayed against the core (graph check): two protocol names
   (tied votes, INCONSISTENT_GROUP_PROTOCOL), batch leaves, two write errors, from an empty
   partition and from a loaded Stable group of two (one static); no offsets, no reloads. *)
MCGraphWideProtocols == {PA, PR, PRR, PRRBack}
MCGraphWideInit == {None,
                    [gen |-> 1, ptype |-> "consumer", pname |-> "range", leader |-> m1,
                     members |-> <<Stored(m1, None), Stored(m2, i1)>>]}

--------------------------------------------------------------------------
(* MCWide: the wider client inputs, from an empty partition: two protocol names (split and tied
   votes, INCONSISTENT_GROUP_PROTOCOL), two instance ids (two static members), per-member
   assignments, batch leaves, two write errors; symmetry over member ids and instance ids. *)
MCWideIds == {m1, m2, m3}
MCWideInstances == {i1, i2}
MCWideProtocols == {PA, PR, PRR, PRRBack}
MCWideBounds == generation <= 2 /\ Len(writes) <= 1 /\ Len(held) <= 1
MCWideSymmetry == SymmOf(MCWideIds, MCWideInstances)

--------------------------------------------------------------------------
(* MCStable: members that keep rejoining and syncing reach Stable (StableSpec), from an empty
   partition and from a loaded Stable group of two (one static), with a few disturbances. *)
MCStableIds == {m1, m2, m3}
MCStableInstances == {i1}
MCStableProtocols == {PA}
MCStableInit == {None,
                 [gen |-> 1, ptype |-> "consumer", pname |-> "range", leader |-> m1,
                  members |-> <<Stored(m1, None), Stored(m2, i1)>>]}

===========================================================================
