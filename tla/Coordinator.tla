---------------------------- MODULE Coordinator ----------------------------
(***************************************************************************)
(* One classic consumer group, as the Python core (groupcoord.core) holds  *)
(* it, with its coordinator's whole reaction to every input event.         *)
(*                                                                         *)
(* * One action per input event of Coordinator.handle: JoinGroup,          *)
(*   SyncGroup, Heartbeat, LeaveGroup, DeleteGroups, the four timer kinds  *)
(*   (heartbeat, join, sync, expire), WriteCompleted, WriteFailed (of the  *)
(*   oldest write, or the newest: FailOrder) and UnloadPartition.         *)
(*   LoadPartition is the initial state (Init), and with Reloads a later   *)
(*   step (the log, `stored`, read again).                                 *)
(* * Clients are an unconstrained environment: any request at any time,    *)
(*   with any member id of the pool Ids (members, pending ids, stale or    *)
(*   unknown ones), any instance id, stale generations. Every choice the   *)
(*   core takes as an input (the new member's uuid, versions, protocols)   *)
(*   is an action parameter.                                               *)
(* * Time is abstract: an armed timer may fire at any moment; the timer    *)
(*   table is the variable `timers` (key -> payload), changed only by the  *)
(*   SetTimer / CancelTimer commands the coordinator emits. A SetTimer     *)
(*   carries the timer's length (`ms`, its deadline minus now): a member's *)
(*   session timeout, the group's rebalance timeout, the new-member join   *)
(*   timeout, the initial delay or the retention check interval.           *)
(* * `out` holds the commands of the last step (responses, writes and      *)
(*   timer commands, in the order the core emits them) and `event` the     *)
(*   event that produced them, so responses and writes are checked too.    *)
(*                                                                         *)
(* The operators below follow core/classic/joining.py, core/classic/membership.py and      *)
(* core/writes.py                                                          *)
(* step by step and keep their names; each works on a record G holding     *)
(* the whole state plus the step's output, and returns the next one.       *)
(* Offsets (core/offsets.py, core/writes.py) are modelled per key: the   *)
(* latest values readers with require_stable see, the committed shadow of *)
(* keys with writes in flight, and each write's undo.                     *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Ids,               \* member ids clients may use (the uuid part of a core member id)
    Instances,         \* group.instance.id values
    None,              \* Python's None
    Protocols,         \* protocol lists a JoinGroup may carry: sequences of <<name, metadata>>
    ProtocolTypes,     \* protocol types a JoinGroup may carry
    RebalanceTimeouts, \* rebalance timeouts a JoinGroup may carry (ms)
    SessionTimeouts,   \* session timeouts a JoinGroup may carry (ms)
    JoinVersions,      \* JoinGroup versions clients use (a static join needs v5+)
    InitialDelay,      \* group.initial.rebalance.delay.ms
    RetentionCheckInterval, \* offsets.retention.check.interval.ms (the expiration timer)
    WriteErrors,       \* storage errors a write may fail with
    InitGroups,        \* what LoadPartition brings: None (no group) or a stored group record
    MaxRequests,       \* client requests in a behaviour; -1: unbounded
    Reduce,            \* TRUE: clients name one free id only (see Canonical)
    TieOrder,          \* protocol names in the order Java's HashMap iterates them (a tied vote)
    OffsetKeys,        \* <<topic, partition>> keys clients commit, fetch and delete, in the core's order
    PartialExpiry,     \* FALSE: offsets age all at once (the retention check sees all or none aged)
    OffsetValues,      \* offsets a commit may carry
    CommitVersions,    \* OffsetCommit versions (v9+: GROUP_ID_NOT_FOUND for a group not held)
    Subscriptions,     \* protocol metadata -> the topics it subscribes to (absent: unreadable)
    Reloads,           \* TRUE: the partition may be loaded again (by this or another coordinator)
    BatchLeaves,       \* TRUE: a LeaveGroup may also carry two identities (KIP-345's batch leave)
    FailOrder          \* which in-flight write may fail: "oldest" (contract rule 4), "newest" (Kafka: the
                       \* batch being appended fails first; a lone write is both), or "both"

Empty == "Empty"
Preparing == "PreparingRebalance"
Completing == "CompletingRebalance"
Stable == "Stable"
Dead == "Dead"
Absent == "Absent"   \* no group held: never created, rolled back or deleted (not a core state)
GroupStates == {Empty, Preparing, Completing, Stable, Dead}

\* ClassicGroupState's valid previous states (core/classic/states.py LEGAL_PREVIOUS).
LegalPrevious ==
    [s \in GroupStates |->
        CASE s = Empty      -> {Preparing}
          [] s = Preparing  -> {Stable, Completing, Empty}
          [] s = Completing -> {Preparing}
          [] s = Stable     -> {Completing}
          [] s = Dead       -> {Stable, Preparing, Completing, Empty}]

\* Timer keys (the core's keys without partition and group).
JoinKey == <<"join">>
SyncKey == <<"sync">>
ExpireKey == <<"expire">>
HbKey(m) == <<"hb", m>>
TimerKeys == {JoinKey, SyncKey, ExpireKey} \cup {HbKey(m) : m \in Ids}
\* How long a freshly added member has to complete its first join (a constant in Kafka,
\* CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS; core/config.py NEW_MEMBER_JOIN_TIMEOUT_MS).
NewMemberJoinTimeout == 300000

VARIABLES
    state,           \* GroupStates \cup {Absent}
    prevState,       \* previous_state
    generation,
    protocolType,    \* None or a protocol type
    protocolName,    \* None or the elected protocol name
    leader,          \* None or a member id
    members,         \* member ids in insertion order (the core's members dict)
    mem,             \* member id -> [inst, protos, rto, sto, join, sync, isNew, asg]
    pending,         \* pending member ids (handed out with MEMBER_ID_REQUIRED)
    pendingSync,     \* members the sync phase still waits for
    newMemberAdded,
    subs,            \* subscribed topics (draft.subscribed_topics), or None
    offsets,         \* key -> [off, by]: the latest value; by: the in-flight write that set it (0: none)
    committed,       \* key -> [v, n]: the committed value of a key with n writes in flight
    stored,          \* the group in __consumer_offsets, as a load reads it: [grp, simple, offs]
    timers,          \* armed timer key -> payload
    writes,          \* in-flight writes, oldest first (completed in order, contract rule 4)
    held,            \* results held behind in-flight writes (contract rule 3)
    budget,          \* client requests left; -1: unbounded
    out,             \* commands emitted by the last step
    event            \* the last event

groupVars == <<state, prevState, generation, protocolType, protocolName, leader, members, mem,
               pending, pendingSync, newMemberAdded, subs>>
offsetVars == <<offsets, committed>>
vars == <<groupVars, offsetVars, stored, timers, writes, held, budget, out, event>>

-----------------------------------------------------------------------------
(* Small helpers *)

Max(a, b) == IF a >= b THEN a ELSE b
Min(a, b) == IF a <= b THEN a ELSE b
Range(s) == {s[i] : i \in 1..Len(s)}
SetKey(f, k, v) == (k :> v) @@ f
DropKey(f, k) == [x \in DOMAIN f \ {k} |-> f[x]]
Remove(s, x) == SelectSeq(s, LAMBDA y : y # x)
Get(f, k, d) == IF k \in DOMAIN f THEN f[k] ELSE d
NoFunction == <<>>
OrEmpty(v) == IF v = None THEN "" ELSE v

\* Error codes by Kafka name.
NONE == "NONE"
\* Kafka's translation of a failed append (core/errors.py).
TranslateAppend(e) ==
    CASE e \in {"UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT"}
            -> "COORDINATOR_NOT_AVAILABLE"
      [] e \in {"NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"} -> "NOT_COORDINATOR"
      [] e \in {"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE"}
            -> "UNKNOWN_SERVER_ERROR"
      [] OTHER -> e
TranslateOperation(e) ==
    IF e = "NETWORK_EXCEPTION" THEN "COORDINATOR_LOAD_IN_PROGRESS" ELSE TranslateAppend(e)

-----------------------------------------------------------------------------
(* Response bodies (core/commands.py), one shape per API. *)

JoinResp(code, gen, ptype, pname, ldr, mid, list, skip) ==
    [api |-> "JoinGroup", code |-> code, gen |-> gen, ptype |-> ptype, pname |-> pname,
     leader |-> ldr, mid |-> mid, members |-> list, skip |-> skip]
JoinError(code, mid) == JoinResp(code, -1, None, None, "", mid, <<>>, FALSE)
SyncResp(code, ptype, pname, asg) ==
    [api |-> "SyncGroup", code |-> code, ptype |-> ptype, pname |-> pname, asg |-> asg]
SyncError(code) == SyncResp(code, None, None, "")
HbResp(code) == [api |-> "Heartbeat", code |-> code]
LeaveResp(code, results) == [api |-> "LeaveGroup", code |-> code, members |-> results]
DeleteResp(code) == [api |-> "DeleteGroups", code |-> code]
\* OffsetCommit and OffsetDelete answer per key (in the request's order); OffsetFetch gives a
\* function key -> offset (-1: none).
CommitResp(keys, code) == [api |-> "OffsetCommit", parts |-> <<>> \o [i \in 1..Len(keys) |-> <<keys[i], code>>]]
FetchResp(code, offs) == [api |-> "OffsetFetch", code |-> code, offs |-> offs]
OffsetDeleteResp(code, parts) == [api |-> "OffsetDelete", code |-> code, parts |-> parts]

\* The response a whole request gets when it fails with `code` (coordinator.error_like).
ErrorForm(r, code) ==
    CASE r.api = "Heartbeat" -> HbResp(code)
      [] r.api = "LeaveGroup" -> LeaveResp(code, <<>>)
      [] r.api = "DeleteGroups" -> DeleteResp(code)
      [] r.api = "OffsetCommit" -> [r EXCEPT !.parts = <<>> \o [i \in 1..Len(r.parts) |-> <<r.parts[i][1], code>>]]
      [] r.api = "OffsetFetch" -> FetchResp(code, NoFunction)
      [] r.api = "OffsetDelete" -> OffsetDeleteResp(code, <<>>)

-----------------------------------------------------------------------------
(* The working record: the whole state plus the step's output. *)

Cur == [st |-> state, prev |-> prevState, gen |-> generation, ptype |-> protocolType,
        pname |-> protocolName, leader |-> leader, members |-> members, mem |-> mem,
        pending |-> pending, psync |-> pendingSync, nma |-> newMemberAdded, subs |-> subs,
        offs |-> offsets, cmt |-> committed, stored |-> stored, timers |-> timers, writes |-> writes, held |-> held, out |-> <<>>,
        cur |-> <<>>, recs |-> <<>>, cbs |-> <<>>]

Emit(G, c) == [G EXCEPT !.out = Append(@, c)]
\* A timer armed `ms` milliseconds from now (the core's deadline_ms - now_ms).
Arm(G, k, p, ms) == [Emit(G, [c |-> "SetTimer", key |-> k, payload |-> p, ms |-> ms])
                    EXCEPT !.timers = SetKey(@, k, p)]
Cancel(G, k) == [Emit(G, [c |-> "CancelTimer", key |-> k]) EXCEPT !.timers = DropKey(@, k)]

\* Who a response goes to: <<"req">> for the request being handled, <<"join", m>> / <<"sync", m>>
\* for a request parked earlier by member m, <<api, m>> for a result held or riding on a write.
ReqTag == <<"req">>
To(G, kind, m) == IF G.cur = <<kind, m>> THEN ReqTag ELSE <<kind, m>>
Respond(G, to, r) == Emit(G, [c |-> "Respond", to |-> to, r |-> r])

\* The records of the operation (coordinator._append) and its write (_emit_writes).
AppendRecord(G, rec, cb) ==
    [G EXCEPT !.recs = Append(@, rec), !.cbs = IF cb = None THEN @ ELSE Append(@, cb)]
EmitWrite(G, resp) ==
    IF G.recs = <<>> THEN G
    ELSE [Emit(G, [c |-> "Write", recs |-> G.recs])
            EXCEPT !.writes = Append(@, [recs |-> G.recs, cbs |-> G.cbs, resp |-> resp]),
                   !.recs = <<>>, !.cbs = <<>>]

\* An operation's own result: held behind in-flight writes (coordinator._result).
Result(G, tag, r) ==
    IF G.writes # <<>>
    THEN [G EXCEPT !.held = Append(@, [to |-> tag, r |-> r, wait |-> Len(G.writes)])]
    ELSE Respond(G, ReqTag, r)

\* coordinator._run_op: the response rides on the operation's write, or is its result.
RunOpEnd(G, tag, r) ==
    IF G.recs = <<>>
    THEN IF r = None THEN G ELSE Result(G, tag, r)
    ELSE EmitWrite(G, IF r = None THEN None ELSE [to |-> tag, r |-> r])

-----------------------------------------------------------------------------
(* The group (model.Group, draft.GroupDraft). *)

IsMember(G, m) == m \in DOMAIN G.mem
Parked(G, m) == G.mem[m].join # ""
IsStatic(G, m) == G.mem[m].inst # None
StaticOf(G, i) ==
    LET ms == {m \in DOMAIN G.mem : G.mem[m].inst = i} IN
    IF ms = {} THEN None ELSE CHOOSE m \in ms : TRUE
AllJoined(G) == (\A m \in DOMAIN G.mem : Parked(G, m)) /\ G.pending = {}
RebalanceTimeoutOf(G) ==
    IF G.members = <<>> THEN 0
    ELSE LET ts == {G.mem[m].rto : m \in DOMAIN G.mem} IN CHOOSE t \in ts : \A u \in ts : u <= t
FirstOf(s, P(_)) ==
    LET is == {i \in 1..Len(s) : P(s[i])} IN
    IF is = {} THEN None ELSE s[CHOOSE i \in is : \A j \in is : i <= j]

Names(p) == {p[i][1] : i \in 1..Len(p)}
Metadata(rec, pname) ==
    LET is == {i \in 1..Len(rec.protos) : rec.protos[i][1] = pname} IN
    IF is = {} THEN "" ELSE rec.protos[CHOOSE i \in is : \A j \in is : i <= j][2]

\* Protocol names every member lists, and the vote (draft.select_protocol): each member votes
\* for its first candidate; the most votes win; a tie goes to the name first in TieOrder (Java's
\* HashMap order, which TLA+ cannot compute from a string), then to the name voted for first.
Candidates(G) ==
    {n \in UNION {Names(G.mem[m].protos) : m \in DOMAIN G.mem} :
        \A m \in DOMAIN G.mem : n \in Names(G.mem[m].protos)}
VoteOf(p, cands) ==
    p[CHOOSE i \in 1..Len(p) : p[i][1] \in cands /\ \A j \in 1..(i - 1) : p[j][1] \notin cands][1]
SelectProtocol(G) ==
    LET cands == Candidates(G)
        votes == [i \in 1..Len(G.members) |-> VoteOf(G.mem[G.members[i]].protos, cands)]
        count(n) == Cardinality({i \in 1..Len(votes) : votes[i] = n})
        first(n) == CHOOSE i \in 1..Len(votes) : votes[i] = n /\ \A j \in 1..(i - 1) : votes[j] # n
        names == Range(votes)
        rank(n) == IF \E j \in 1..Len(TieOrder) : TieOrder[j] = n
                   THEN CHOOSE j \in 1..Len(TieOrder) : TieOrder[j] = n ELSE Len(TieOrder) + 1
        before(n, o) == rank(n) < rank(o) \/ (rank(n) = rank(o) /\ first(n) <= first(o))
        best == CHOOSE n \in names :
                    \A o \in names : count(o) < count(n) \/ (count(o) = count(n) /\ before(n, o))
    IN best
\* ClassicGroup.supportsProtocols: the Empty rule by state; without members every name counts
\* as listed by all of them (the group keeps its protocol type while it rebalances).
SupportsProtocols(G, ptype, names) ==
    IF G.st = Empty THEN ptype # "" /\ names # {}
    ELSE ptype = G.ptype /\ (G.members = <<>> \/ names \cap Candidates(G) # {})

\* ClassicGroup.validateMember: the error, or NONE.
Validate(G, mid, inst) ==
    LET s == IF inst = None THEN None ELSE StaticOf(G, inst) IN
    IF inst # None /\ s = None THEN "UNKNOWN_MEMBER_ID"
    ELSE IF inst # None /\ s # mid THEN "FENCED_INSTANCE_ID"
    ELSE IF ~IsMember(G, mid) THEN "UNKNOWN_MEMBER_ID"
    ELSE NONE

Transition(G, s) == [G EXCEPT !.prev = G.st, !.st = s]

AddToGroup(G, m, rec, ptype) ==   \* draft.add
    [G EXCEPT !.ptype = IF G.members = <<>> THEN ptype ELSE @,
              !.leader = IF @ = None THEN m ELSE @,
              !.members = Append(@, m),
              !.mem = SetKey(@, m, rec),
              !.pending = @ \ {m}]

RemoveFromGroup(G, m) ==   \* draft.remove
    LET rest == Remove(G.members, m) IN
    [G EXCEPT !.members = rest, !.mem = DropKey(@, m),
              !.leader = IF @ = m THEN (IF rest = <<>> THEN None ELSE Head(rest)) ELSE @,
              !.pending = @ \ {m}, !.psync = @ \ {m}]

PutMember(G, m, rec) == [G EXCEPT !.mem[m] = rec]

\* draft.replace_static: the instance's member moves to a new id (at the end of the order).
ReplaceStatic(G, old, new) ==
    LET rec == [G.mem[old] EXCEPT !.join = "", !.sync = FALSE, !.isNew = FALSE] IN
    [G EXCEPT !.members = Append(Remove(@, old), new),
              !.mem = SetKey(DropKey(@, old), new, rec),
              !.leader = IF @ = old THEN new ELSE @]   \* the old id stays pending-sync (Kafka)

\* The member list a leader gets (membership._member_list).
MemberList(G) ==
    <<>> \o [i \in 1..Len(G.members) |->
               LET m == G.members[i] IN <<m, G.mem[m].inst, Metadata(G.mem[m], G.pname)>>]

JoinOk(G, m, withMembers) ==
    JoinResp(NONE, G.gen, G.ptype, G.pname, OrEmpty(G.leader), m,
             IF withMembers THEN MemberList(G) ELSE <<>>, FALSE)

\* A GroupMetadata record (membership._metadata_record); `asg` None: the stored assignments.
EmptyRecord(G) ==
    [type |-> "GroupMetadata", gen |-> G.gen, ptype |-> OrEmpty(G.ptype), pname |-> None,
     leader |-> None, members |-> <<>>]
FullRecord(G, asg) ==
    [type |-> "GroupMetadata", gen |-> G.gen, ptype |-> OrEmpty(G.ptype), pname |-> G.pname,
     leader |-> G.leader,
     members |-> <<>> \o [i \in 1..Len(G.members) |->
                    LET m == G.members[i] IN
                    [id |-> m, inst |-> G.mem[m].inst, rto |-> G.mem[m].rto, sto |-> G.mem[m].sto,
                     meta |-> Metadata(G.mem[m], G.pname),
                     asg |-> IF asg = None THEN G.mem[m].asg ELSE Get(asg, m, "")]]]
Tombstone == [type |-> "GroupTombstone", gen |-> 0, ptype |-> "", pname |-> None,
              leader |-> None, members |-> <<>>]

-----------------------------------------------------------------------------
(* Offsets, held per key (writes._set_offsets, _offsets_written, _committed_offsets) *)

\* What a member's protocol metadata subscribes to: a set of topics, or None (unreadable).
SubsOf(meta) == IF meta \in DOMAIN Subscriptions THEN Subscriptions[meta] ELSE None
SubscribedTopics(G) ==   \* draft.subscribed_topics
    IF G.ptype # "consumer" THEN None
    ELSE IF G.members = <<>> THEN {}
    ELSE IF G.pname = None THEN None
    ELSE LET ts == {SubsOf(Metadata(G.mem[m], G.pname)) : m \in Range(G.members)} IN
         IF None \in ts THEN None ELSE UNION ts
Subscribed(G, k) == IF G.subs # None THEN k[1] \in G.subs ELSE G.ptype = "consumer"

OffsetCommitRecord(k, v) == [type |-> "OffsetCommit", key |-> k, off |-> v]
OffsetTombstone(k) == [type |-> "OffsetTombstone", key |-> k]
RECURSIVE OffsetTombstones(_, _)
OffsetTombstones(G, ks) ==
    IF ks = <<>> THEN G ELSE OffsetTombstones(AppendRecord(G, OffsetTombstone(Head(ks)), None), Tail(ks))


\* Set the keys of `changes` (<<key, offset or None>>, distinct keys) at once; their undo rides on
\* the operation's write: each entry remembers the write that set it (`by`, its place in
\* `writes`; 0: none in flight), each undo the write that set the value before (`pby`), each key its
\* committed value while writes of it are in flight.
Entry(v, by) == [off |-> v, by |-> by]
RECURSIVE SetEach(_, _, _)
SetEach(G, changes, undo) ==
    IF changes = {} THEN [G EXCEPT !.cbs = IF undo = {} THEN @ ELSE Append(@, [k |-> "offsets", undo |-> undo])]
    ELSE LET c == CHOOSE c \in changes : TRUE
             k == c[1]
             prev == IF k \in DOMAIN G.offs THEN G.offs[k].off ELSE None
             pby == IF k \in DOMAIN G.offs THEN G.offs[k].by ELSE 0
             G1 == [G EXCEPT !.cmt = IF k \in DOMAIN @ THEN [@ EXCEPT ![k].n = @ + 1]
                                     ELSE SetKey(@, k, [v |-> prev, n |-> 1]),
                             !.offs = IF c[2] = None THEN DropKey(@, k)
                                      ELSE SetKey(@, k, Entry(c[2], Len(G.writes) + 1))]
         IN SetEach(G1, changes \ {c}, undo \cup {[key |-> k, prev |-> prev, pby |-> pby, wrote |-> c[2]]})
SetOffsets(G, changes) == SetEach(G, changes, {})

\* One key's write is done: on success its value is committed; on failure the key goes back to
\* the committed value when no other write of it is in flight, else to the value before this
\* write where this write's value is still the latest (committed_counts_writes: the key's
\* committed value is there). The write being finished is writes[pos]: the oldest (1), or the newest
\* when it fails first (the value before it is then back, with the write that set it).
OffsetWritten(G, u, err, pos) ==
    LET slot == G.cmt[u.key]
        n == slot.n - 1
        has == u.key \in DOMAIN G.offs
        latest == IF u.wrote = None THEN ~has ELSE has /\ G.offs[u.key].by = pos
        val == IF n = 0 THEN slot.v ELSE u.prev
        by == IF n = 0 THEN 0 ELSE u.pby
        G1 == IF err = None \/ (n > 0 /\ ~latest) THEN G
              ELSE [G EXCEPT !.offs = IF val = None THEN DropKey(@, u.key) ELSE SetKey(@, u.key, Entry(val, by))]
    IN [G1 EXCEPT !.cmt = IF n = 0 THEN DropKey(@, u.key)
                          ELSE SetKey(@, u.key, [v |-> IF err = None THEN u.wrote ELSE slot.v, n |-> n])]
RECURSIVE OffsetsWritten(_, _, _, _)
OffsetsWritten(G, undo, err, pos) ==
    IF undo = {} THEN G
    ELSE LET u == CHOOSE u \in undo : TRUE IN OffsetsWritten(OffsetWritten(G, u, err, pos), undo \ {u}, err, pos)
\* The oldest write is gone: entries it set are written, the others' writes move up one place.
Up(i) == IF i > 0 THEN i - 1 ELSE 0
ShiftUndo(c) ==
    IF c.k = "offsets" THEN [c EXCEPT !.undo = {[u EXCEPT !.pby = Up(u.pby)] : u \in c.undo}] ELSE c
ShiftWrites(G) ==
    [G EXCEPT !.offs = [k \in DOMAIN G.offs |-> [G.offs[k] EXCEPT !.by = Up(@)]],
              !.writes = [i \in DOMAIN G.writes |-> [G.writes[i] EXCEPT !.cbs = [j \in DOMAIN @ |-> ShiftUndo(@[j])]]]]

\* What a fetch without require_stable reads: the latest values, except keys with writes in
\* flight, which read their committed value (writes._committed_offsets).
CommittedView(G) ==
    LET ks == {k \in DOMAIN G.offs : k \notin DOMAIN G.cmt} \cup {k \in DOMAIN G.cmt : G.cmt[k].v # None} IN
    [k \in ks |-> IF k \in DOMAIN G.cmt THEN G.cmt[k].v ELSE G.offs[k].off]
LatestView(G) == [k \in DOMAIN G.offs |-> G.offs[k].off]

-----------------------------------------------------------------------------
(* The log: __consumer_offsets as a load reads it (loading._on_load), kept per group as
   [grp: the last GroupMetadata record (in the form of a stored group, see LoadPartition below)
   or None, simple: offsets without a group record (a "simple" group), offs: key -> offset].
   Compaction keeps the last record of each key, which leaves that reading unchanged. *)

StoredOf(rec) ==
    [grp |-> IF rec = None THEN None ELSE [f \in DOMAIN rec \ {"offs"} |-> rec[f]],
     simple |-> FALSE,
     offs |-> IF rec # None /\ "offs" \in DOMAIN rec THEN rec.offs ELSE NoFunction]
StoredGroup(r) ==   \* a GroupMetadata record as the load reads its members
    [gen |-> r.gen, ptype |-> r.ptype, pname |-> r.pname, leader |-> r.leader,
     members |-> <<>> \o [i \in 1..Len(r.members) |->
        [id |-> r.members[i].id, inst |-> r.members[i].inst, protos |-> << <<OrEmpty(r.pname), r.members[i].meta>> >>,
         rto |-> r.members[i].rto, sto |-> r.members[i].sto, asg |-> r.members[i].asg]]]
Apply(st, r) ==
    CASE r.type = "GroupMetadata" -> [st EXCEPT !.grp = StoredGroup(r), !.simple = FALSE]
      [] r.type = "GroupTombstone" -> [grp |-> None, simple |-> FALSE, offs |-> NoFunction]
      [] r.type = "OffsetCommit" -> [st EXCEPT !.offs = SetKey(@, r.key, r.off), !.simple = @ \/ st.grp = None]
      [] r.type = "OffsetTombstone" -> [st EXCEPT !.offs = DropKey(@, r.key)]
RECURSIVE ApplyAll(_, _)
ApplyAll(st, rs) == IF rs = <<>> THEN st ELSE ApplyAll(Apply(st, Head(rs)), Tail(rs))
\* The records of the first n in-flight writes, in order.
RECURSIVE RecordsOf(_, _)
RecordsOf(ws, n) == IF n = 0 \/ ws = <<>> THEN <<>> ELSE Head(ws).recs \o RecordsOf(Tail(ws), n - 1)
\* The stored group as a LoadPartition event names it (None: no group record).
RecOf(st) ==
    IF st.grp = None THEN None
    ELSE IF DOMAIN st.offs = {} THEN st.grp ELSE [f \in DOMAIN st.grp \cup {"offs"} |-> IF f = "offs" THEN st.offs ELSE st.grp[f]]

-----------------------------------------------------------------------------
(* prepareRebalance, propagateAssignment, completeClassicGroupJoin *)

\* membership._propagate_assignment, over the members in order.
RECURSIVE Propagate(_, _, _, _, _)
Propagate(G, ids, code, reset, asg) ==
    IF ids = <<>> THEN G
    ELSE LET m == Head(ids)
             rec == G.mem[m]
             newAsg == IF reset THEN "" ELSE IF asg # None THEN Get(asg, m, "") ELSE rec.asg
             G1 == PutMember(G, m, [rec EXCEPT !.asg = newAsg])
             ok == code = NONE
             G2 == IF rec.sync
                   THEN Arm(PutMember(Respond(G1, To(G1, "sync", m),
                                              SyncResp(code, IF ok THEN G1.ptype ELSE None,
                                                       IF ok THEN G1.pname ELSE None, newAsg)),
                                      m, [G1.mem[m] EXCEPT !.sync = FALSE]),
                            HbKey(m), None, rec.sto)
                   ELSE G1
         IN Propagate(G2, Tail(ids), code, reset, asg)

\* The first loop of completeClassicGroupJoin: drop dynamic members that did not rejoin.
RECURSIVE DropNotRejoined(_, _)
DropNotRejoined(G, ids) ==
    IF ids = <<>> THEN G
    ELSE LET m == Head(ids) IN
         DropNotRejoined(IF ~Parked(G, m) /\ ~IsStatic(G, m)
                         THEN Cancel(RemoveFromGroup(G, m), HbKey(m)) ELSE G, Tail(ids))

\* The last loop: answer the parked joins, re-arm heartbeats, everyone must sync.
RECURSIVE AnswerJoins(_, _, _)
AnswerJoins(G, ids, list) ==
    IF ids = <<>> THEN G
    ELSE LET m == Head(ids)
             G1 == IF Parked(G, m)
                   THEN Respond(G, To(G, "join", m),
                                [JoinOk(G, m, FALSE) EXCEPT !.members = IF m = G.leader THEN list ELSE <<>>])
                   ELSE G
             G2 == Arm(G1, HbKey(m), None, G.mem[m].sto)
             G3 == [G2 EXCEPT !.mem[m] = [@ EXCEPT !.join = "", !.isNew = FALSE], !.psync = @ \cup {m}]
         IN AnswerJoins(G3, Tail(ids), list)

InitNextGeneration(G) ==
    LET G1 == [G EXCEPT !.gen = @ + 1]
        G2 == [G1 EXCEPT !.pname = IF G1.members # <<>> THEN SelectProtocol(G1) ELSE None]
        G3 == [G2 EXCEPT !.subs = SubscribedTopics(G2)]
    IN [Transition(G3, IF G3.members # <<>> THEN Completing ELSE Empty) EXCEPT !.psync = {}]

CompleteJoin(G) ==
    LET G1 == DropNotRejoined(Cancel(G, JoinKey), G.members)
        leaderOut == G1.leader # None /\ ~Parked(G1, G1.leader)
        joined == FirstOf(G1.members, LAMBDA m : Parked(G1, m))
    IN
    \* only static members left: at least 1 ms, so that a 0 ms timeout cannot re-fire at once
    IF leaderOut /\ joined = None THEN Arm(G1, JoinKey, <<>>, Max(RebalanceTimeoutOf(G1), 1))
    ELSE IF G1.leader = None /\ G1.members # <<>> THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))
    ELSE LET G2 == InitNextGeneration(IF leaderOut THEN [G1 EXCEPT !.leader = joined] ELSE G1) IN
         IF G2.st = Empty
         THEN AppendRecord(G2, EmptyRecord(G2), [k |-> "empty_group"])
         ELSE Arm(AnswerJoins(G2, G2.members, MemberList(G2)), SyncKey, G2.gen, RebalanceTimeoutOf(G2))

PrepareRebalance(G) ==
    LET G1 == IF G.st = Completing THEN Propagate(G, G.members, "REBALANCE_IN_PROGRESS", TRUE, None)
              ELSE G
        G2 == Cancel([G1 EXCEPT !.psync = {}], SyncKey)
        initial == G.st = Empty
        G3 == IF initial
              THEN Arm(G2, JoinKey, <<"initial", InitialDelay,
                                      Max(RebalanceTimeoutOf(G2) - InitialDelay, 0)>>, InitialDelay)
              ELSE G2
        G4 == Transition(G3, Preparing)
    IN IF initial THEN G4
       ELSE IF AllJoined(G4) THEN CompleteJoin(G4) ELSE Arm(G4, JoinKey, <<>>, RebalanceTimeoutOf(G4))

MaybeCompleteJoin(G) ==
    IF G.st = Preparing /\ G.prev # Empty /\ AllJoined(G) THEN CompleteJoin(G) ELSE G

RebalanceOrCompleteJoin(G) ==
    IF G.st \in {Empty, Stable, Completing} THEN PrepareRebalance(G) ELSE MaybeCompleteJoin(G)

-----------------------------------------------------------------------------
(* JoinGroup (membership._join) *)

NewMember(req) ==
    [inst |-> req.inst, protos |-> req.protos, rto |-> req.rto, sto |-> req.sto, join |-> "J", sync |-> FALSE,
     isNew |-> TRUE, asg |-> ""]

AddMember(G, req, m) ==
    LET G1 == IF G.st = Preparing /\ G.prev = Empty THEN [G EXCEPT !.nma = TRUE] ELSE G
        G2 == [AddToGroup(G1, m, NewMember(req), req.ptype) EXCEPT !.cur = <<"join", m>>]
    IN RebalanceOrCompleteJoin(Arm(G2, HbKey(m), None, NewMemberJoinTimeout))

UpdateMember(G, m, protos, rto, sto, join) ==
    [G EXCEPT !.mem[m] = [@ EXCEPT !.protos = protos, !.rto = rto, !.sto = sto, !.join = join],
              !.cur = IF join # "" THEN <<"join", m>> ELSE @]

Fence(G, old, rec) ==
    LET G1 == IF rec.join # "" THEN Respond(G, <<"join", old>>, JoinError("FENCED_INSTANCE_ID", old))
              ELSE G
    IN IF rec.sync THEN Respond(G1, <<"sync", old>>, SyncError("FENCED_INSTANCE_ID")) ELSE G1

ReplaceStaticMember(G, req, old, new) ==
    LET previousLeader == G.leader
        oldRec == G.mem[old]
        \* armed with the session timeout it had before this join's (Kafka: before updateMember)
        G1 == Arm(Fence(ReplaceStatic(G, old, new), old, oldRec), HbKey(new), None, oldRec.sto)
        G2 == UpdateMember(G1, new, req.protos, req.rto, req.sto, "J")
    IN
    IF G2.st = Stable
    THEN IF OrEmpty(G2.pname) = SelectProtocol(G2)
         THEN LET G3 == [G2 EXCEPT !.mem[new].join = "R"] IN   \* parked until the write is done
              AppendRecord(G3, FullRecord(G3, None),
                           [k |-> "static_replace", inst |-> req.inst, old |-> old, new |-> new,
                            protos |-> oldRec.protos, rto |-> oldRec.rto, sto |-> oldRec.sto,
                            leader |-> previousLeader,
                            v9 |-> req.v >= 9])
         ELSE RebalanceOrCompleteJoin(G2)
    ELSE IF G2.st = Completing THEN PrepareRebalance(G2)
    ELSE MaybeCompleteJoin(G2)

JoinNewMember(G, req) ==
    IF ~SupportsProtocols(G, req.ptype, Names(req.protos))
    THEN Respond(G, ReqTag, JoinError("INCONSISTENT_GROUP_PROTOCOL", ""))
    ELSE IF req.inst # None
    THEN LET old == StaticOf(G, req.inst) IN
         IF old # None THEN ReplaceStaticMember(G, req, old, req.uuid) ELSE AddMember(G, req, req.uuid)
    ELSE IF req.v >= 4
    THEN Respond(Arm([G EXCEPT !.pending = @ \cup {req.uuid}], HbKey(req.uuid), None, req.sto),
                 ReqTag, JoinError("MEMBER_ID_REQUIRED", req.uuid))
    ELSE AddMember(G, req, req.uuid)

JoinExistingMember(G, req) ==
    LET m == req.mid
        err == Validate(G, m, req.inst) IN
    IF ~SupportsProtocols(G, req.ptype, Names(req.protos))
    THEN Respond(G, ReqTag, JoinError("INCONSISTENT_GROUP_PROTOCOL", m))
    ELSE IF m \in G.pending
    THEN IF req.inst # None THEN Respond(G, ReqTag, JoinError("UNKNOWN_SERVER_ERROR", ""))
         ELSE AddMember(G, req, m)
    ELSE IF err # NONE
    THEN Respond(G, ReqTag, JoinError(err, m))
    ELSE IF G.st = Preparing
    THEN MaybeCompleteJoin(UpdateMember(G, m, req.protos, req.rto, req.sto, "J"))
    ELSE IF G.st = Completing
    THEN IF G.mem[m].protos = req.protos
         THEN Respond(G, ReqTag, JoinOk(G, m, m = G.leader))
         ELSE PrepareRebalance(UpdateMember(G, m, req.protos, req.rto, req.sto, "J"))
    ELSE IF G.st = Stable
    THEN IF m = G.leader \/ G.mem[m].protos # req.protos
         THEN PrepareRebalance(UpdateMember(G, m, req.protos, req.rto, req.sto, "J"))
         ELSE Respond(G, ReqTag, JoinOk(G, m, FALSE))
    ELSE Respond(G, ReqTag, JoinError("UNKNOWN_MEMBER_ID", m))

CreateGroup(G) ==
    [G EXCEPT !.st = Empty, !.prev = Dead, !.gen = 0, !.ptype = None, !.pname = None,
              !.leader = None, !.members = <<>>, !.mem = NoFunction, !.pending = {},
              !.psync = {}, !.nma = FALSE, !.subs = None]

DoJoin(G, req) ==
    IF G.st = Dead THEN Respond(G, ReqTag, JoinError("NOT_COORDINATOR", ""))
    ELSE IF G.st = Absent /\ req.mid # "" THEN Respond(G, ReqTag, JoinError("UNKNOWN_MEMBER_ID", req.mid))
    ELSE LET isNewGroup == G.st = Absent
             G0 == IF isNewGroup THEN CreateGroup(G) ELSE G
             G1 == IF req.mid = "" THEN JoinNewMember(G0, req) ELSE JoinExistingMember(G0, req)
             G2 == IF isNewGroup /\ G1.recs = <<>>
                   THEN AppendRecord(G1, EmptyRecord(G1), [k |-> "new_group", snap |-> None]) ELSE G1
         IN RunOpEnd(G2, None, None)

-----------------------------------------------------------------------------
(* SyncGroup (membership._sync) *)

RemovePendingSync(G, m) ==
    LET G1 == [G EXCEPT !.psync = @ \ {m}] IN
    IF G1.psync = {} THEN Cancel(G1, SyncKey) ELSE G1

DoSync(G, req) ==
    LET m == req.mid
        err == Validate(G, m, req.inst) IN
    IF G.st = Dead THEN Respond(G, ReqTag, SyncError("NOT_COORDINATOR"))
    ELSE IF G.st \in {Absent, Empty} THEN Respond(G, ReqTag, SyncError("UNKNOWN_MEMBER_ID"))
    ELSE IF err # NONE THEN Respond(G, ReqTag, SyncError(err))
    ELSE IF req.gen # G.gen THEN Respond(G, ReqTag, SyncError("ILLEGAL_GENERATION"))
    ELSE IF (req.ptype # None /\ G.ptype # None /\ req.ptype # G.ptype)
            \/ (req.pname # None /\ G.pname # None /\ req.pname # G.pname)
    THEN Respond(G, ReqTag, SyncError("INCONSISTENT_GROUP_PROTOCOL"))
    ELSE IF G.st = Preparing THEN Respond(G, ReqTag, SyncError("REBALANCE_IN_PROGRESS"))
    ELSE IF G.st = Completing
    THEN LET G1 == RemovePendingSync([G EXCEPT !.mem[m].sync = TRUE, !.cur = <<"sync", m>>], m) IN
         RunOpEnd(IF m = G1.leader
                  THEN AppendRecord(G1, FullRecord(G1, req.asg), [k |-> "sync", gen |-> G1.gen, asg |-> req.asg])
                  ELSE G1, None, None)
    ELSE Respond(RemovePendingSync(G, m), ReqTag, SyncResp(NONE, G.ptype, G.pname, G.mem[m].asg))

-----------------------------------------------------------------------------
(* Heartbeat (membership._heartbeat) *)

DoHeartbeat(G, req) ==
    LET m == req.mid
        err == Validate(G, m, req.inst) IN
    IF G.st = Dead THEN Respond(G, ReqTag, HbResp("NOT_COORDINATOR"))
    ELSE IF G.st = Absent THEN Respond(G, ReqTag, HbResp("UNKNOWN_MEMBER_ID"))
    ELSE IF err # NONE THEN Respond(G, ReqTag, HbResp(err))
    ELSE IF req.gen # G.gen THEN Respond(G, ReqTag, HbResp("ILLEGAL_GENERATION"))
    ELSE IF G.st = Empty THEN Result(G, <<"Heartbeat", m>>, HbResp("UNKNOWN_MEMBER_ID"))
    ELSE Result(Arm(G, HbKey(m), None, G.mem[m].sto), <<"Heartbeat", m>>,
                HbResp(IF G.st = Preparing THEN "REBALANCE_IN_PROGRESS" ELSE NONE))

-----------------------------------------------------------------------------
(* LeaveGroup (membership._leave); each identity is [mid, inst]. *)

RemoveMemberForLeave(G, m) ==
    LET G1 == Cancel(G, HbKey(m))
        G2 == IF Parked(G1, m)
              THEN [Respond(G1, To(G1, "join", m), JoinError("UNKNOWN_MEMBER_ID", ""))
                       EXCEPT !.mem[m].join = ""]
              ELSE G1
    IN RemoveFromGroup(G2, m)

RECURSIVE LeaveLoop(_, _, _)
LeaveLoop(G, ids, results) ==   \* returns [g |-> G, results |-> ...]
    IF ids = <<>> THEN [g |-> G, results |-> results]
    ELSE LET x == Head(ids)
             target == IF x.inst # None THEN StaticOf(G, x.inst) ELSE None
             err == Validate(G, x.mid, x.inst)
             step ==
                IF x.mid = ""
                THEN IF target = None THEN [g |-> G, code |-> "UNKNOWN_MEMBER_ID"]
                     ELSE [g |-> RemoveMemberForLeave(G, target), code |-> NONE]
                ELSE IF x.mid \in G.pending
                THEN [g |-> Cancel([G EXCEPT !.pending = @ \ {x.mid}], HbKey(x.mid)), code |-> NONE]
                ELSE IF err # NONE
                THEN [g |-> G, code |-> err]
                ELSE [g |-> RemoveMemberForLeave(G, x.mid), code |-> NONE]
         IN LeaveLoop(step.g, Tail(ids), Append(results, [mid |-> x.mid, inst |-> x.inst, code |-> step.code]))

LeaveTag(req) == <<"LeaveGroup", IF req.ids = <<>> THEN "" ELSE Head(req.ids).mid>>

DoLeave(G, req) ==
    IF G.st = Dead THEN Respond(G, ReqTag, LeaveResp("NOT_COORDINATOR", <<>>))
    ELSE IF G.st = Absent
    THEN Respond(G, ReqTag, LeaveResp(NONE, <<>> \o [i \in 1..Len(req.ids) |->
                    [mid |-> req.ids[i].mid, inst |-> req.ids[i].inst, code |-> "UNKNOWN_MEMBER_ID"]]))
    ELSE LET r == LeaveLoop(G, req.ids, <<>>)
             removed == \E i \in 1..Len(r.results) : r.results[i].code = NONE
             G1 == IF ~removed THEN r.g
                   ELSE IF r.g.st \in {Stable, Completing} THEN PrepareRebalance(r.g)
                   ELSE IF r.g.st = Preparing THEN MaybeCompleteJoin(r.g)
                   ELSE r.g
         IN RunOpEnd(G1, LeaveTag(req), LeaveResp(NONE, r.results))

-----------------------------------------------------------------------------
(* DeleteGroups (coordinator._on_delete_groups), for this group only. *)

GroupSnapshot(G) ==
    [st |-> G.st, prev |-> G.prev, gen |-> G.gen, ptype |-> G.ptype, pname |-> G.pname,
     leader |-> G.leader, members |-> G.members, mem |-> G.mem, pending |-> G.pending,
     psync |-> G.psync, nma |-> G.nma, subs |-> G.subs]
Drop(G) ==    \* the group is no longer held
    [G EXCEPT !.st = Absent, !.prev = None, !.gen = 0, !.ptype = None, !.pname = None,
              !.leader = None, !.members = <<>>, !.mem = NoFunction, !.pending = {},
              !.psync = {}, !.nma = FALSE, !.subs = None]
Restore(G, s) ==
    [G EXCEPT !.st = s.st, !.prev = s.prev, !.gen = s.gen, !.ptype = s.ptype, !.pname = s.pname,
              !.leader = s.leader, !.members = s.members, !.mem = s.mem, !.pending = s.pending,
              !.psync = s.psync, !.nma = s.nma, !.subs = s.subs]
\* writes._delete_group: the group goes at once, its offsets too (their undo first, then the
\* group's restore, should the tombstone fail); Kafka writes no offset tombstones for them.
DeleteGroup(G) ==
    AppendRecord(SetOffsets(Drop(G), {<<k, None>> : k \in DOMAIN G.offs}), Tombstone,
                 [k |-> "restore_group", snap |-> GroupSnapshot(G)])
\* writes._remove_group: the group and its offsets are gone, nothing to undo; the committed
\* values of keys with writes in flight stay until those writes settle.
RemoveGroup(G) == [Drop(G) EXCEPT !.offs = NoFunction]

DoDelete(G) ==
    IF G.st = Dead THEN Respond(G, ReqTag, DeleteResp("NOT_COORDINATOR"))
    ELSE IF G.st = Absent THEN Respond(G, ReqTag, DeleteResp("GROUP_ID_NOT_FOUND"))
    ELSE IF G.st # Empty THEN Respond(G, ReqTag, DeleteResp("NON_EMPTY_GROUP"))
    ELSE LET G1 == DeleteGroup(OffsetTombstones(G, SelectSeq(OffsetKeys, LAMBDA k : k \in DOMAIN G.offs))) IN
         EmitWrite([G1 EXCEPT !.cbs = Append(@, [k |-> "delete_result"])], None)

-----------------------------------------------------------------------------
(* OffsetCommit, OffsetFetch, OffsetDelete (core/offsets.py), for this group only. A commit's
   req: [mid, inst, gen, v, offs: <<<<key, offset>>>>]; a fetch's [stable, keys: None (all) or
   <<key>>]; a delete's [keys: <<key>>]. *)

\* ClassicGroup.validateOffsetCommit (non-transactional): the error, or NONE.
CommitError(G, req) ==
    IF req.gen < 0 /\ G.st = Empty THEN NONE
    ELSE IF req.gen >= 0 \/ req.mid # "" \/ req.inst # None
    THEN LET e == Validate(G, req.mid, req.inst) IN
         IF e # NONE THEN e
         ELSE IF req.gen # G.gen THEN "ILLEGAL_GENERATION"
         ELSE IF G.st = Completing THEN "REBALANCE_IN_PROGRESS"
         ELSE NONE
    ELSE "UNKNOWN_MEMBER_ID"

CommitKeys(req) == [i \in 1..Len(req.offs) |-> req.offs[i][1]]

RECURSIVE CommitRecords(_, _)
CommitRecords(G, offs) ==
    IF offs = <<>> THEN G
    ELSE CommitRecords(AppendRecord(G, OffsetCommitRecord(Head(offs)[1], Head(offs)[2]), None), Tail(offs))

DoCommit(G, req) ==
    IF G.st = Dead THEN Respond(G, ReqTag, CommitResp(CommitKeys(req), "NOT_COORDINATOR"))
    ELSE IF G.st = Absent /\ req.gen >= 0
    THEN Respond(G, ReqTag, CommitResp(CommitKeys(req), IF req.v >= 9 THEN "GROUP_ID_NOT_FOUND" ELSE "ILLEGAL_GENERATION"))
    ELSE IF G.st # Absent /\ CommitError(G, req) # NONE
    THEN Respond(G, ReqTag, CommitResp(CommitKeys(req), CommitError(G, req)))
    ELSE LET simple == G.st = Absent
             G1 == IF G.st \in {Stable, Preparing} THEN Arm(G, HbKey(req.mid), None, G.mem[req.mid].sto) ELSE G
             G2 == CommitRecords(G1, req.offs)
             G3 == IF req.offs = <<>> THEN G2
                   ELSE LET G4 == SetOffsets(IF simple THEN CreateGroup(G2) ELSE G2,
                                             {<<req.offs[i][1], req.offs[i][2]>> : i \in 1..Len(req.offs)})
                        IN IF simple THEN [G4 EXCEPT !.cbs = Append(@, [k |-> "drop_simple"])] ELSE G4
         IN RunOpEnd(G3, <<"OffsetCommit", req.mid>>, CommitResp(CommitKeys(req), NONE))

FetchKeys(G, req, view) == IF req.keys = None THEN view ELSE [k \in Range(req.keys) |-> Get(view, k, -1)]

DoFetch(G, req) ==
    IF G.st = Dead THEN Respond(G, ReqTag, FetchResp("NOT_COORDINATOR", NoFunction))
    ELSE LET view == IF req.stable THEN (IF G.st = Absent THEN NoFunction ELSE LatestView(G))
                     ELSE IF G.st = Absent /\ DOMAIN G.cmt = {} THEN NoFunction ELSE CommittedView(G)
             r == FetchResp(NONE, FetchKeys(G, req, view))
         IN IF req.stable THEN Result(G, <<"OffsetFetch", "">>, r) ELSE Respond(G, ReqTag, r)

DoOffsetDelete(G, req) ==
    IF G.st = Dead THEN Respond(G, ReqTag, OffsetDeleteResp("NOT_COORDINATOR", <<>>))
    ELSE IF G.st = Absent THEN Respond(G, ReqTag, OffsetDeleteResp("GROUP_ID_NOT_FOUND", <<>>))
    ELSE IF G.st \in {Stable, Preparing, Completing} /\ G.ptype # "consumer"
    THEN Respond(G, ReqTag, OffsetDeleteResp("NON_EMPTY_GROUP", <<>>))
    ELSE LET ks == req.keys
             gone == SelectSeq(ks, LAMBDA k : ~Subscribed(G, k) /\ k \in DOMAIN G.offs)
             parts == <<>> \o [i \in 1..Len(ks) |->
                                 <<ks[i], IF Subscribed(G, ks[i]) THEN "GROUP_SUBSCRIBED_TO_TOPIC" ELSE NONE>>]
             G1 == SetOffsets(OffsetTombstones(G, gone), {<<k, None>> : k \in Range(gone)})
         IN RunOpEnd(G1, <<"OffsetDelete", "">>, OffsetDeleteResp(NONE, parts))

-----------------------------------------------------------------------------
(* Timers (membership._heartbeat_expired, _join_timer_fired, _sync_timer_fired, coordinator._expire) *)

HeartbeatExpired(G, m) ==
    IF G.st \in {Absent, Dead} THEN G
    ELSE IF m \in G.pending
    THEN LET G1 == [G EXCEPT !.pending = @ \ {m}] IN
         IF G1.st = Preparing /\ AllJoined(G1) THEN CompleteJoin(G1) ELSE G1
    ELSE IF ~IsMember(G, m) \/ (~G.mem[m].isNew /\ (Parked(G, m) \/ G.mem[m].sync)) THEN G
    ELSE LET G1 == IF Parked(G, m)
                   THEN [Respond(G, To(G, "join", m), JoinError("UNKNOWN_MEMBER_ID", ""))
                            EXCEPT !.mem[m].join = ""]
                   ELSE G
             G2 == RemoveFromGroup(G1, m)
         IN IF G2.st \in {Stable, Completing} THEN RebalanceOrCompleteJoin(G2)
            ELSE IF G2.st = Preparing /\ AllJoined(G2) THEN CompleteJoin(G2)
            ELSE G2

JoinTimerFired(G, payload) ==
    IF G.st # Preparing THEN G
    ELSE IF payload # <<>> /\ G.nma /\ payload[3] # 0
    THEN LET d == Min(InitialDelay, payload[3]) IN
         Arm([G EXCEPT !.nma = FALSE], JoinKey, <<"initial", d, Max(payload[3] - payload[2], 0)>>, d)
    ELSE CompleteJoin(G)

RECURSIVE DropUnsynced(_, _)
DropUnsynced(G, ids) ==
    IF ids = <<>> THEN G
    ELSE DropUnsynced(IF Head(ids) \in G.psync
                      THEN Cancel(RemoveFromGroup(G, Head(ids)), HbKey(Head(ids))) ELSE G, Tail(ids))

SyncTimerFired(G, payload) ==
    IF G.st \in {Absent, Dead} \/ G.gen # payload THEN G
    ELSE IF G.st \notin {Completing, Stable} \/ G.psync = {} THEN G
    ELSE PrepareRebalance(DropUnsynced(G, G.members))

\* coordinator._expire: which offsets have aged past their retention is time, chosen by the
\* environment: `aged` lists them in the order their tombstones are written (OffsetKeys' order,
\* the core's), among the keys that may expire (Expirable); the group goes when it is Empty and
\* every offset it had expired.
BaseDefined(G) == G.ptype = None \/ G.st = Empty \/ (G.ptype = "consumer" /\ G.subs # None /\ G.st = Stable)
Expirable(G) ==
    IF G.st \in {Absent, Dead} \/ ~BaseDefined(G) THEN {} ELSE {k \in DOMAIN G.offs : ~Subscribed(G, k)}
AgedChoices(G) ==
    LET E == Expirable(G) IN
    {SelectSeq(OffsetKeys, LAMBDA k : k \in S) : S \in IF PartialExpiry THEN SUBSET E ELSE {{}, E}}
ExpireFired(G, aged) ==
    IF G.st = Absent THEN Arm(G, ExpireKey, None, RetentionCheckInterval)
    ELSE LET allExpired == DOMAIN G.offs = {} \/ (BaseDefined(G) /\ Range(aged) = DOMAIN G.offs)
             G1 == IF DOMAIN G.offs = {} \/ ~BaseDefined(G) THEN G
                   ELSE SetOffsets(OffsetTombstones(G, aged), {<<k, None>> : k \in Range(aged)})
             G2 == IF allExpired /\ G.st = Empty THEN DeleteGroup(G1) ELSE G1
         IN Arm(G2, ExpireKey, None, RetentionCheckInterval)

\* writes._expire_held_pending: the expiry also holds for the group snapshots that a failed
\* write may bring back (deviation D15).
WithoutPending(c, m) ==
    IF c.k \in {"restore_group", "new_group"} /\ c.snap # None
    THEN [c EXCEPT !.snap.pending = @ \ {m}] ELSE c
ExpireHeldPending(G, m) ==
    [G EXCEPT !.writes = <<>> \o [i \in 1..Len(G.writes) |->
        [G.writes[i] EXCEPT !.cbs = <<>> \o [j \in 1..Len(G.writes[i].cbs) |->
                                                WithoutPending(G.writes[i].cbs[j], m)]]]]

DoTimer(G, k, aged) ==
    LET G0 == [G EXCEPT !.timers = DropKey(@, k)]
        p == G.timers[k]
        G1 == CASE k = JoinKey -> JoinTimerFired(G0, p)
                [] k = SyncKey -> SyncTimerFired(G0, p)
                [] k = ExpireKey -> ExpireFired(G0, aged)
                [] OTHER -> ExpireHeldPending(HeartbeatExpired(G0, k[2]), k[2])
    IN EmitWrite(G1, None)

-----------------------------------------------------------------------------
(* Write outcomes (coordinator._on_write_done, _finish_write, the callbacks) *)

SyncWritten(G, cb, err) ==
    IF G.st # Completing \/ G.gen # cb.gen THEN G
    ELSE IF err = None
    THEN Transition(Propagate(G, G.members, NONE, FALSE, cb.asg), Stable)
    ELSE PrepareRebalance(Propagate(G, G.members, TranslateAppend(err), TRUE, None))

StaticReplaceWritten(G, cb, err) ==
    LET parked == G.st \notin {Absent, Dead} /\ IsMember(G, cb.new) /\ G.mem[cb.new].join = "R"
        isLeader == G.leader = cb.new
    IN
    IF err = None
    THEN IF ~parked THEN G
         ELSE LET G1 == [G EXCEPT !.mem[cb.new].join = ""] IN
              Respond(G1, <<"join", cb.new>>,
                      IF cb.v9 THEN [JoinOk(G1, cb.new, isLeader) EXCEPT !.skip = isLeader]
                      ELSE [JoinOk(G1, cb.new, FALSE) EXCEPT !.leader = OrEmpty(cb.leader)])
    ELSE LET G1 == IF parked /\ StaticOf(G, cb.inst) = cb.new
                   THEN Arm(ReplaceStatic(UpdateMember(G, cb.new, cb.protos, cb.rto, cb.sto, ""), cb.new, cb.old),
                            HbKey(cb.old), None, cb.sto)
                   ELSE G
         IN IF ~parked THEN G1
            ELSE Respond(G1, <<"join", cb.new>>,
                         JoinResp(TranslateAppend(err), G1.gen, G1.ptype, G1.pname, OrEmpty(cb.leader),
                                  "", <<>>, FALSE))

RECURSIVE AnswerAll(_, _, _)
AnswerAll(G, ids, code) ==   \* writes._rollback_new_group's answers
    IF ids = <<>> THEN G
    ELSE LET m == Head(ids)
             G1 == IF Parked(G, m) THEN Respond(G, <<"join", m>>, JoinError(code, "")) ELSE G
             G2 == IF G.mem[m].sync THEN Respond(G1, <<"sync", m>>, SyncError(code)) ELSE G1
         IN AnswerAll(G2, Tail(ids), code)

\* writes._forget_restores: a later tombstone deleted the group; its failure must not bring
\* back a group that never existed. Restores after the group's next creation write stay.
IsCreation(c) == c.k = "new_group"
FirstCreation(ws) ==
    LET is == {i \in 1..Len(ws) : \E j \in 1..Len(ws[i].cbs) : IsCreation(ws[i].cbs[j])} IN
    IF is = {} THEN Len(ws) + 1 ELSE CHOOSE i \in is : \A l \in is : i <= l
ForgetRestores(G) ==
    LET n == FirstCreation(G.writes) IN
    [G EXCEPT !.writes = <<>> \o [i \in 1..Len(G.writes) |->
        IF i < n THEN [G.writes[i] EXCEPT !.cbs = SelectSeq(@, LAMBDA c : c.k # "restore_group")]
        ELSE G.writes[i]]]

\* The new group never existed; a group whose deletion failed meanwhile (snap) comes back.
\* Kafka's revert removes it even when its join completed meanwhile; after writes that may
\* record it (`later`: outcomes in order, D6) it stays once its generation moved.
RollbackNewGroup(G, err, snap, later) ==
    IF G.st = Absent
    THEN LET G1 == ForgetRestores(G) IN IF snap = None THEN G1 ELSE Restore(G1, snap)
    ELSE IF G.st = Dead \/ (G.gen # 0 /\ later) THEN G
    ELSE LET G0 == AnswerAll(G, G.members, TranslateAppend(err))
             G1 == IF G.gen # 0 THEN Cancel(G0, SyncKey) ELSE G0 IN
         IF snap = None THEN Drop(G1) ELSE Restore(G1, snap)

\* writes._displace_on_rollback: a failed tombstone while a new group holds the id; the old
\* group is attached to the first in-flight creation write, to come back if that fails too.
\* Without one, a simple group holding the id (nobody joining) has no record of its own: the
\* log holds the old group with its offsets, and the old group is back.
FreeCreation(c) == c.k = "new_group" /\ c.snap = None
\* A group made by OffsetCommits alone (writes._is_simple): no record of its own.
Simple(G) == G.st = Empty /\ G.ptype = None /\ G.gen = 0
Displace(G, snap) ==
    LET ws == {i \in 1..Len(G.writes) : \E j \in 1..Len(G.writes[i].cbs) : FreeCreation(G.writes[i].cbs[j])} IN
    IF ws = {} THEN (IF Simple(G) /\ G.pending = {} THEN Restore(G, snap) ELSE G)
    ELSE LET i == CHOOSE i \in ws : \A l \in ws : i <= l
             cbs == G.writes[i].cbs
         IN [G EXCEPT !.writes[i].cbs =
                [j \in 1..Len(cbs) |-> IF FreeCreation(cbs[j]) THEN [cbs[j] EXCEPT !.snap = snap] ELSE cbs[j]]]

RunCallback(G, cb, err, pos) ==
    CASE cb.k = "sync" -> SyncWritten(G, cb, err)
      [] cb.k = "static_replace" -> StaticReplaceWritten(G, cb, err)
      [] cb.k = "new_group" -> IF err = None THEN G ELSE RollbackNewGroup(G, err, cb.snap, pos = 1 /\ G.writes # <<>>)
      [] cb.k = "restore_group" ->
            IF err = None THEN G ELSE IF G.st = Absent THEN Restore(G, cb.snap) ELSE Displace(G, cb.snap)
      [] cb.k = "offsets" -> OffsetsWritten(G, cb.undo, err, pos)
      [] cb.k = "drop_simple" ->   \* a simple group whose first commit failed goes, if nothing is left
            IF err # None /\ Simple(G) /\ DOMAIN G.offs = {}
            THEN RemoveGroup(G) ELSE G
      [] cb.k = "delete_result" ->
            Respond(G, <<"DeleteGroups", "">>, DeleteResp(IF err = None THEN NONE ELSE TranslateOperation(err)))
      [] OTHER -> G   \* "empty_group": Kafka only logs a failure

RECURSIVE RunCallbacks(_, _, _, _)
RunCallbacks(G, cbs, err, pos) ==
    IF cbs = <<>> THEN G ELSE RunCallbacks(RunCallback(G, Head(cbs), err, pos), Tail(cbs), err, pos)

\* The write that was writes[pos] (taken out of G.writes) is done.
FinishWriteAt(G, w, err, pos) ==
    LET G0 == RunCallbacks([G EXCEPT !.recs = <<>>, !.cbs = <<>>], w.cbs, err, pos)
        G1 == EmitWrite(IF pos = 1 THEN ShiftWrites(G0) ELSE G0, None) IN
    IF w.resp = None THEN G1
    ELSE Respond(G1, w.resp.to, IF err = None THEN w.resp.r ELSE ErrorForm(w.resp.r, TranslateOperation(err)))
FinishWrite(G, w, err) == FinishWriteAt(G, w, err, 1)

\* coordinator._release_deferred after the oldest write is done.
RECURSIVE Release(_, _, _)
Release(G, hs, keep) ==
    IF hs = <<>> THEN [G EXCEPT !.held = keep]
    ELSE LET h == Head(hs) IN
         IF h.wait <= 1 THEN Release(Respond(G, h.to, h.r), Tail(hs), keep)
         ELSE Release(G, Tail(hs), Append(keep, [h EXCEPT !.wait = @ - 1]))

DoWriteDone(G, err) ==
    LET w == Head(G.writes)
        G0 == IF err = None THEN [G EXCEPT !.stored = ApplyAll(@, w.recs)] ELSE G   \* acknowledged: in the log
        G1 == FinishWrite([G0 EXCEPT !.writes = Tail(@)], w, err)
    IN Release(G1, G1.held, <<>>)

\* The newest of several writes fails first, as Kafka fails the batch being appended (its state
\* goes back to before that batch) while older batches wait for replication. Results held behind
\* it wait for the older writes only; none is released until the oldest is done.
DoLastWriteFailed(G, err) ==
    LET n == Len(G.writes)
        G0 == [G EXCEPT !.writes = SubSeq(@, 1, n - 1),
                        !.held = [i \in DOMAIN @ |-> [@[i] EXCEPT !.wait = IF @ >= n THEN n - 1 ELSE @]]]
    IN FinishWriteAt(G0, G.writes[n], err, n)

-----------------------------------------------------------------------------
(* UnloadPartition (loading._on_unload) *)

RECURSIVE FailWrites(_, _)
FailWrites(G, ws) ==
    IF ws = <<>> THEN G
    ELSE FailWrites(FinishWrite([G EXCEPT !.writes = Tail(@)], Head(ws), "NOT_COORDINATOR"), Tail(ws))

RECURSIVE AnswerHeld(_, _)
AnswerHeld(G, hs) ==
    IF hs = <<>> THEN [G EXCEPT !.held = <<>>]
    ELSE AnswerHeld(Respond(G, Head(hs).to, ErrorForm(Head(hs).r, "NOT_COORDINATOR")), Tail(hs))

RECURSIVE AnswerParked(_, _)
AnswerParked(G, ids) ==
    IF ids = <<>> THEN G
    ELSE LET m == Head(ids)
             G1 == IF G.st = Preparing /\ Parked(G, m)
                   THEN Respond(G, <<"join", m>>, JoinError("NOT_COORDINATOR", m))
                   ELSE IF G.st \in {Completing, Stable} /\ G.mem[m].sync
                   THEN Respond(G, <<"sync", m>>, SyncError("NOT_COORDINATOR"))
                   ELSE G
         IN AnswerParked(G1, Tail(ids))

\* durable: how many of the in-flight writes reached the log although the coordinator fails them.
DoUnload(G, durable) ==
    LET n == Len(G.writes)
        G1 == FailWrites([G EXCEPT !.stored = ApplyAll(@, RecordsOf(G.writes, durable))], G.writes)
        G2 == AnswerHeld(G1, G1.held)
        G3 == IF G2.st \in {Absent, Dead} THEN G2 ELSE AnswerParked(G2, G2.members)
        G4 == [RemoveGroup(G3) EXCEPT !.st = Dead, !.timers = NoFunction, !.cmt = NoFunction]
    IN Emit(G4, [c |-> "CancelPartitionTimers"])

-----------------------------------------------------------------------------
(* LoadPartition (loading._on_load): the initial state. A stored record is
   [gen, ptype, pname, leader, members: <<[id, inst, protos, rto, sto, asg]>>], with the
   group's committed offsets in `offs` (key -> offset) if it has any. *)

RECURSIVE LoadMembers(_, _)
LoadMembers(G, ms) ==
    IF ms = <<>> THEN G
    ELSE LET x == Head(ms) IN
         LoadMembers(AddToGroup(G, x.id, [inst |-> x.inst, protos |-> x.protos, rto |-> x.rto, sto |-> x.sto,
                                          join |-> "", sync |-> FALSE, isNew |-> FALSE,
                                          asg |-> x.asg], G.ptype), Tail(ms))

RECURSIVE ArmAll(_, _)
ArmAll(G, ids) ==
    IF ids = <<>> THEN G ELSE ArmAll(Arm(G, HbKey(Head(ids)), None, G.mem[Head(ids)].sto), Tail(ids))

LoadFrom(st) ==
    LET rec == st.grp
        G0 == [st |-> Absent, prev |-> None, gen |-> 0, ptype |-> None, pname |-> None, leader |-> None,
               members |-> <<>>, mem |-> NoFunction, pending |-> {}, psync |-> {}, nma |-> FALSE,
               subs |-> None, offs |-> NoFunction, cmt |-> NoFunction, stored |-> st,
               timers |-> NoFunction, writes |-> <<>>, held |-> <<>>, out |-> <<>>, cur |-> <<>>,
               recs |-> <<>>, cbs |-> <<>>]
        G1 == IF rec # None
              THEN LoadMembers([G0 EXCEPT !.st = IF rec.members = <<>> THEN Empty ELSE Stable, !.prev = Dead,
                                          !.gen = rec.gen, !.ptype = IF rec.ptype = "" THEN None ELSE rec.ptype,
                                          !.pname = rec.pname], rec.members)
              ELSE IF st.simple THEN [G0 EXCEPT !.st = Empty, !.prev = Dead]   \* a simple group
              ELSE G0
        G2 == IF rec = None THEN G1 ELSE [G1 EXCEPT !.leader = rec.leader, !.subs = SubscribedTopics(G1)]
        G3 == IF rec = None /\ ~st.simple THEN G2
              ELSE [G2 EXCEPT !.offs = [k \in DOMAIN st.offs |-> Entry(st.offs[k], 0)]]
    IN Arm(ArmAll(G3, G3.members), ExpireKey, None, RetentionCheckInterval)

-----------------------------------------------------------------------------
(* Steps: the working record becomes the next state. *)

Assign(G) ==
    /\ state' = G.st
    /\ prevState' = G.prev
    /\ generation' = G.gen
    /\ protocolType' = G.ptype
    /\ protocolName' = G.pname
    /\ leader' = G.leader
    /\ members' = G.members
    /\ mem' = G.mem
    /\ pending' = G.pending
    /\ pendingSync' = G.psync
    /\ newMemberAdded' = G.nma
    /\ subs' = G.subs
    /\ offsets' = G.offs
    /\ committed' = G.cmt
    /\ stored' = G.stored
    /\ timers' = G.timers
    /\ writes' = G.writes
    /\ held' = G.held
    /\ out' = G.out

CanRequest == budget # 0
Spend == budget' = IF budget < 0 THEN budget ELSE budget - 1

\* req: [mid, inst, ptype, protos, rto, sto, v, uuid]
JoinGroup(req) == Assign(DoJoin(Cur, req)) /\ event' = [type |-> "JoinGroup"] @@ req
\* req: [mid, inst, gen, ptype, pname, asg]
SyncGroup(req) == Assign(DoSync(Cur, req)) /\ event' = [type |-> "SyncGroup"] @@ req
\* req: [mid, inst, gen]
Heartbeat(req) == Assign(DoHeartbeat(Cur, req)) /\ event' = [type |-> "Heartbeat"] @@ req
\* req: [ids: <<[mid, inst]>>]
LeaveGroup(req) == Assign(DoLeave(Cur, req)) /\ event' = [type |-> "LeaveGroup"] @@ req
DeleteGroups == Assign(DoDelete(Cur)) /\ event' = [type |-> "DeleteGroups"]
\* req: [mid, inst, gen, v, offs]
OffsetCommit(req) == Assign(DoCommit(Cur, req)) /\ event' = [type |-> "OffsetCommit"] @@ req
\* req: [stable, keys]
OffsetFetch(req) == Assign(DoFetch(Cur, req)) /\ event' = [type |-> "OffsetFetch"] @@ req
\* req: [keys]
OffsetDelete(req) == Assign(DoOffsetDelete(Cur, req)) /\ event' = [type |-> "OffsetDelete"] @@ req

\* TimerFired for an armed key, with the payload of its current arming (contract rule 5).
HeartbeatTimer(m) ==
    /\ HbKey(m) \in DOMAIN timers
    /\ Assign(DoTimer(Cur, HbKey(m), <<>>)) /\ event' = [type |-> "TimerFired", key |-> HbKey(m)]
JoinTimer ==
    /\ JoinKey \in DOMAIN timers
    /\ Assign(DoTimer(Cur, JoinKey, <<>>)) /\ event' = [type |-> "TimerFired", key |-> JoinKey]
SyncTimer ==
    /\ SyncKey \in DOMAIN timers
    /\ Assign(DoTimer(Cur, SyncKey, <<>>)) /\ event' = [type |-> "TimerFired", key |-> SyncKey]
\* aged: the offsets whose retention has passed (time), in the order the core expires them.
ExpireTimer(aged) ==
    /\ ExpireKey \in DOMAIN timers
    /\ Assign(DoTimer(Cur, ExpireKey, aged)) /\ event' = [type |-> "TimerFired", key |-> ExpireKey, aged |-> aged]

WriteCompleted ==
    /\ writes # <<>>
    /\ Assign(DoWriteDone(Cur, None)) /\ event' = [type |-> "WriteCompleted"]
WriteFailed(e) ==
    /\ writes # <<>> /\ (FailOrder # "newest" \/ Len(writes) = 1)
    /\ Assign(DoWriteDone(Cur, e)) /\ event' = [type |-> "WriteFailed", error |-> e]
WriteFailedLast(e) ==
    /\ FailOrder # "oldest" /\ Len(writes) >= 2
    /\ Assign(DoLastWriteFailed(Cur, e)) /\ event' = [type |-> "WriteFailedLast", error |-> e]

\* The partition moves away; the first `durable` in-flight writes reached the log (only where the
\* partition may be loaded again: nothing else reads the log).
UnloadPartition(durable) ==
    /\ state # Dead
    /\ Assign(DoUnload(Cur, durable)) /\ event' = [type |-> "UnloadPartition", durable |-> durable]
Durable == IF Reloads THEN 0..Len(writes) ELSE {0}

\* LoadPartition again, by this coordinator or the next one: the group as the log holds it.
Reload ==
    /\ Reloads /\ state = Dead /\ CanRequest /\ Spend
    /\ Assign(LoadFrom(stored)) /\ event' = [type |-> "LoadPartition", group |-> RecOf(stored), durable |-> 0]

\* Another coordinator loads the partition while this one is gone without a word (a crash):
\* nothing it held is answered or kept; the first `durable` of its writes in flight reached the log.
Failover(durable) ==
    /\ Reloads /\ state # Dead /\ CanRequest /\ Spend
    /\ LET st == ApplyAll(stored, RecordsOf(writes, durable)) IN
       Assign(LoadFrom(st)) /\ event' = [type |-> "LoadPartition", group |-> RecOf(st), durable |-> durable]

InitFrom(rec) ==
    LET G == LoadFrom(StoredOf(rec)) IN
    /\ budget = MaxRequests /\ event = [type |-> "LoadPartition", group |-> rec, durable |-> 0]
    /\ state = G.st /\ prevState = G.prev /\ generation = G.gen /\ protocolType = G.ptype
    /\ protocolName = G.pname /\ leader = G.leader /\ members = G.members /\ mem = G.mem
    /\ pending = G.pending /\ pendingSync = G.psync /\ newMemberAdded = G.nma /\ timers = G.timers
    /\ subs = G.subs /\ offsets = G.offs /\ committed = G.cmt /\ stored = G.stored
    /\ writes = G.writes /\ held = G.held /\ out = G.out

Init == \E rec \in InitGroups : InitFrom(rec)

-----------------------------------------------------------------------------
(* The environment: what clients may send. *)

NoInst == {None}
\* Ids free for a new member: not in use (a member, pending, or pending-sync: a replaced static
\* member's old id stays there), and not named by an in-flight write: a static
\* replacement's old and new ids, and the members and pending members of a group copy that a
\* failed write would bring back (restore_group, new_group's displaced group). Core ids are
\* never reused; a spec id named there must not be either.
SnapIds(s) == Range(s.members) \cup s.pending
WriteIds(c) ==
    CASE c.k = "static_replace" -> {c.old, c.new}
      [] c.k \in {"restore_group", "new_group"} /\ c.snap # None -> SnapIds(c.snap)
      [] OTHER -> {}
InUse == Range(members) \cup pending \cup pendingSync
         \cup UNION {WriteIds(c) : c \in UNION {Range(w.cbs) : w \in Range(writes)}}
FreeIds == Ids \ InUse
\* With Reduce, a client names only the ids in use and one free id (all free ids are alike up to
\* renaming), and a new member gets that id: fewer transitions, the same states up to symmetry.
Canonical(S) == IF Reduce /\ S # {} THEN {CHOOSE x \in S : TRUE} ELSE S
NewIds == Canonical(FreeIds)
Named == InUse \cup Canonical(Ids \ InUse)

JoinRequests ==
    LET new == NewIds
        maxV == CHOOSE v \in JoinVersions : \A w \in JoinVersions : w <= v
    IN
    {r \in [mid : {""} \cup Named, inst : NoInst \cup Instances, ptype : ProtocolTypes, protos : Protocols,
            rto : RebalanceTimeouts, sto : SessionTimeouts, v : JoinVersions, uuid : new \cup {None}] :
        /\ r.inst # None => r.v >= 5
        /\ IF r.mid = "" THEN r.uuid \in new ELSE r.uuid = None /\ (Reduce => r.v = maxV)}

\* A leader assigns to every member it knows, each its own ("a1" to the first in `members`,
\* "a2" to the second, ...: one per member, so a member handed another's assignment shows), or
\* sends no assignment.
AssignmentOf(x) == "a" \o ToString(CHOOSE i \in 1..Len(members) : members[i] = x)
Assignments(m) ==
    IF state = Completing /\ m = leader
    THEN {[x \in DOMAIN mem |-> AssignmentOf(x)] @@ NoFunction} \cup (IF Reduce THEN {} ELSE {NoFunction})
    ELSE {NoFunction}

SyncRequests ==
    UNION {{[mid |-> m, inst |-> i, gen |-> g, ptype |-> None, pname |-> None, asg |-> a] : a \in Assignments(m)}
           : m \in Named, i \in NoInst \cup Instances, g \in {generation, generation - 1}}

HeartbeatRequests ==
    {[mid |-> m, inst |-> i, gen |-> g] : m \in Named, i \in NoInst \cup Instances, g \in {generation, generation - 1}}

\* One identity (any id, any instance), or (BatchLeaves) two different ones in either order, each
\* as an admin client names a member (KIP-345): a named id with its own instance (none for an id
\* that is not a member, which is unknown), or an instance id alone.
LeaveIdentities == {[mid |-> m, inst |-> i] : m \in {""} \cup Named, i \in NoInst \cup Instances}
BatchIdentities ==
    {[mid |-> m, inst |-> IF m \in DOMAIN mem THEN mem[m].inst ELSE None] : m \in Named}
    \cup {[mid |-> "", inst |-> i] : i \in Instances}
LeaveRequests ==
    {[ids |-> <<x>>] : x \in LeaveIdentities}
    \cup (IF BatchLeaves THEN {[ids |-> xy] : xy \in {p \in BatchIdentities \X BatchIdentities : p[1] # p[2]}}
          ELSE {})

\* Commits of one key, by members, stale ones, unknown ones and "simple" (generation -1) clients.
CommitRequests ==
    {[mid |-> m, inst |-> i, gen |-> g, v |-> v, offs |-> <<<<k, o>>>>] :
        m \in {""} \cup Named, i \in NoInst \cup Instances, g \in {generation, generation - 1, -1},
        v \in CommitVersions, k \in Range(OffsetKeys), o \in OffsetValues}
FetchRequests ==   \* none in configurations without offsets
    IF OffsetKeys = <<>> THEN {}
    ELSE {[stable |-> s, keys |-> ks] : s \in BOOLEAN, ks \in {None} \cup {<<k>> : k \in Range(OffsetKeys)}}
OffsetDeleteRequests == {[keys |-> <<k>>] : k \in Range(OffsetKeys)}

Client ==
    /\ CanRequest /\ Spend
    /\ \/ \E req \in JoinRequests : JoinGroup(req)
       \/ \E req \in SyncRequests : SyncGroup(req)
       \/ \E req \in HeartbeatRequests : Heartbeat(req)
       \/ \E req \in LeaveRequests : LeaveGroup(req)
       \/ DeleteGroups
       \/ \E req \in CommitRequests : OffsetCommit(req)
       \/ \E req \in FetchRequests : OffsetFetch(req)
       \/ \E req \in OffsetDeleteRequests : OffsetDelete(req)

Coordinator ==
    /\ UNCHANGED budget
    /\ \/ \E m \in Ids : HeartbeatTimer(m)
       \/ JoinTimer
       \/ SyncTimer
       \/ \E aged \in AgedChoices(Cur) : ExpireTimer(aged)
       \/ WriteCompleted
       \/ \E e \in WriteErrors : WriteFailed(e)
       \/ \E e \in WriteErrors : WriteFailedLast(e)
       \/ \E d \in Durable : UnloadPartition(d)

\* Unloaded, with nothing left to ask: only stuttering (not a deadlock).
Done == state = Dead /\ budget = 0 /\ UNCHANGED vars

Next == Client \/ Coordinator \/ Reload \/ (\E d \in Durable : Failover(d)) \/ Done

\* Timers fire and writes finish eventually; clients owe nothing.
Fairness ==
    /\ \A m \in Ids : []<>(HbKey(m) \notin DOMAIN timers) \/ []<><<UNCHANGED budget /\ HeartbeatTimer(m)>>_vars
    /\ []<>(JoinKey \notin DOMAIN timers) \/ []<><<UNCHANGED budget /\ JoinTimer>>_vars
    /\ []<>(SyncKey \notin DOMAIN timers) \/ []<><<UNCHANGED budget /\ SyncTimer>>_vars
    /\ []<>(writes = <<>>) \/ []<><<UNCHANGED budget /\ (WriteCompleted \/ \E e \in WriteErrors : WriteFailed(e))>>_vars

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

=============================================================================
