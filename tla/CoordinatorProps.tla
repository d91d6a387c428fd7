-------------------------- MODULE CoordinatorProps --------------------------
(***************************************************************************)
(* What must hold of Coordinator: state invariants, action properties      *)
(* (checked on every step, including the commands in out'), and liveness  *)
(* under fair timers and writes. Names in snake_case are those of          *)
(* adapters/checks/invariants.py (INVARIANT_NAMES); tla/README.md maps them.          *)
(***************************************************************************)
EXTENDS Coordinator

Held == state \notin {Absent, Dead}
Ms == Range(members)
Valid(m, i) == Held /\ (i # None => StaticOf(Cur, i) = m) /\ m \in Ms

TypeOK ==
    /\ state \in GroupStates \cup {Absent}
    /\ generation \in Int
    /\ members \in Seq(Ids)
    /\ DOMAIN mem = Ms /\ Len(members) = Cardinality(Ms)
    /\ \A m \in Ms : mem[m].join \in {"", "J", "R"} /\ mem[m].sync \in BOOLEAN
                     /\ mem[m].isNew \in BOOLEAN /\ mem[m].inst \in Instances \cup {None}
                     /\ mem[m].rto \in Nat /\ mem[m].sto \in Nat
    /\ pending \subseteq Ids /\ pendingSync \subseteq Ids
    /\ newMemberAdded \in BOOLEAN
    /\ DOMAIN timers \subseteq TimerKeys
    /\ leader \in Ids \cup {None}
    /\ subs = None \/ subs \subseteq STRING
    /\ \A k \in DOMAIN offsets : offsets[k].off \in Int /\ offsets[k].by \in 0..Len(writes)
    /\ \A k \in DOMAIN committed : committed[k].n \in Nat \ {0}
    /\ DOMAIN stored = {"grp", "simple", "offs"} /\ stored.simple \in BOOLEAN
    /\ stored.simple => stored.grp = None

-----------------------------------------------------------------------------
(* State invariants (adapters/checks/invariants.py check_group, check_timers) *)

leader_is_member == ((Ms # {}) <=> (leader \in Ms)) /\ (Ms = {} => leader = None)
empty_has_no_members == state = Empty => members = <<>> /\ protocolName = None
static_map_consistent ==
    \A m, n \in Ms : m # n /\ mem[m].inst # None => mem[m].inst # mem[n].inst
pending_not_members == pending \cap Ms = {}
\* (An id that is no member is a replaced static member's, left there as Kafka does.)
pending_sync_subset ==
    /\ pendingSync \cap Ms \subseteq {m \in Ms : ~mem[m].sync}
    /\ pendingSync # {} => state \in {Completing, Stable}
settled_group_has_protocol ==
    state \in {Completing, Stable} =>
        Ms # {} /\ protocolName # None /\ \A m \in Ms : protocolName \in Names(mem[m].protos)
parked_sync_only_completing == \A m \in Ms : mem[m].sync => state = Completing
parked_join_state ==
    \A m \in Ms : mem[m].join # "" => state = Preparing \/ (state = Stable /\ mem[m].join = "R")
new_member_only_preparing == \A m \in Ms : mem[m].isNew => state = Preparing
generation_non_negative == generation >= 0
join_timer_when_preparing == state = Preparing => JoinKey \in DOMAIN timers
sync_timer_generation ==
    SyncKey \in DOMAIN timers => state \in {Completing, Stable} /\ timers[SyncKey] = generation
pending_member_has_timer == \A m \in pending : HbKey(m) \in DOMAIN timers

(* Spec-only invariants *)
\* The join phase ends as soon as everyone has joined, except during the initial delay.
JoinPhaseCompletesWhenAllJoined == ~(state = Preparing /\ prevState # Empty /\ AllJoined(Cur))
\* A settled group has completed at least one join phase: the first generation is 1.
SettledGenerationPositive == state \in {Completing, Stable} => generation >= 1
\* While the sync phase waits for someone, the sync timer is armed (KAFKA-12890).
SyncTimerWhileAwaitingSync == state = Completing /\ pendingSync # {} => SyncKey \in DOMAIN timers
\* Every held result waits for a write; an unloaded partition holds nothing.
HeldOnlyBehindWrites == held # <<>> => writes # <<>>
NothingLeftWhenDead == state = Dead => writes = <<>> /\ held = <<>> /\ DOMAIN timers = {}
\* With no write in flight, memory is not behind the log: a reload would bring back neither a
\* group that memory dropped nor other offsets (memory may be ahead: a rebalance writes when
\* it ends). Checked where writes fail newest first, as Kafka's do (MCFailover); with the
\* oldest first (contract rule 4, D6) they do not hold, and LogGenerationNotAhead holds in
\* neither order (tla/README.md, Findings).
SettledAlive == writes = <<>> /\ state # Dead
LogGroupHeld == SettledAlive /\ stored.grp # None => state # Absent
LogOffsetsHeld == SettledAlive => LatestView(Cur) = stored.offs
LogGenerationNotAhead == SettledAlive /\ stored.grp # None /\ state # Absent => generation >= stored.grp.gen

(* Offsets *)
\* Which keys each in-flight write changes (its undo).
WriteKeys(i) == UNION {{u.key : u \in c.undo} : c \in {c \in Range(writes[i].cbs) : c.k = "offsets"}}
\* A key's committed shadow counts the in-flight writes of it (while its group is held).
committed_counts_writes ==
    \A k \in DOMAIN committed : committed[k].n = Cardinality({i \in 1..Len(writes) : k \in WriteKeys(i)})
\* A value set by an in-flight write is that write's: its undo names the key with that value.
offset_set_by_its_write ==
    \A k \in DOMAIN offsets : offsets[k].by > 0 =>
        \E c \in Range(writes[offsets[k].by].cbs) :
            c.k = "offsets" /\ \E u \in c.undo : u.key = k /\ u.wrote = offsets[k].off
\* Without writes in flight, readers see the latest values: nothing is pending.
settled_offsets_are_committed == writes = <<>> => DOMAIN committed = {} /\ \A k \in DOMAIN offsets : offsets[k].by = 0
\* An unloaded partition holds no offsets.
no_offsets_when_dead == state = Dead => DOMAIN offsets = {} /\ DOMAIN committed = {}

Invariants ==
    /\ TypeOK /\ leader_is_member /\ empty_has_no_members /\ static_map_consistent
    /\ pending_not_members /\ pending_sync_subset /\ settled_group_has_protocol
    /\ parked_sync_only_completing /\ parked_join_state /\ new_member_only_preparing
    /\ generation_non_negative /\ join_timer_when_preparing /\ sync_timer_generation
    /\ pending_member_has_timer /\ JoinPhaseCompletesWhenAllJoined /\ SettledGenerationPositive
    /\ SyncTimerWhileAwaitingSync /\ HeldOnlyBehindWrites /\ NothingLeftWhenDead
    /\ committed_counts_writes /\ offset_set_by_its_write /\ settled_offsets_are_committed
    /\ no_offsets_when_dead

-----------------------------------------------------------------------------
(* Action properties: one step, with the commands it emitted (out'). *)

Responds == {i \in 1..Len(out') : out'[i].c = "Respond"}
Resp(i) == out'[i].r
\* The answer to the request being handled, if sent in this step.
Own == {Resp(i) : i \in {j \in Responds : out'[j].to = ReqTag}}
\* The result of the request being handled: sent now or held behind writes.
OwnResult == Own \cup (IF Len(held') > Len(held) THEN {held'[Len(held')].r} ELSE {})
Ev == event'
HeldNext == state' \notin {Absent, Dead}
StaticNext(i) == IF \E m \in DOMAIN mem' : mem'[m].inst = i
                 THEN CHOOSE m \in DOMAIN mem' : mem'[m].inst = i ELSE None
Successors(s) == {t \in GroupStates : s \in LegalPrevious[t]}

ViaPreparing(s) == IF s \in {Stable, Completing} THEN {Completing, Empty} ELSE {}
LegalStep == state \in GroupStates /\ state' \in GroupStates /\ state' # state =>
                 state' \in Successors(state) \cup ViaPreparing(state)
\* A load again (Reloads) starts a new group from the log: not a transition of the unloaded one.
Loading == Ev.type = "LoadPartition"
legal_transition == [][Loading \/ LegalStep]_vars
dead_is_absorbing == [][state = Dead /\ ~Loading => state' = Dead]_vars
\* A failed write creating the group reverts it (whatever its generation by then): the group
\* never existed, and a group whose deletion failed meanwhile comes back, Empty, with its own
\* generation (Kafka reverts both writes).
Reverted == Ev.type \in {"WriteFailed", "WriteFailedLast"} /\ (generation = 0 \/ state' \in {Absent, Empty})
generation_monotonic == [][Held /\ HeldNext /\ ~Reverted /\ ~Loading => generation' >= generation]_vars
generation_step == [][Held /\ HeldNext /\ ~Reverted /\ ~Loading => generation' \in {generation, generation + 1}]_vars
generation_bump_iff_join_completed ==
    [][Held /\ HeldNext /\ ~Reverted /\ ~Loading =>
         /\ generation' = generation + 1 => state' \in {Completing, Empty}
         /\ state = Preparing /\ state' \in {Completing, Empty} => generation' = generation + 1
         /\ state = Stable /\ state' = Stable => generation' = generation]_vars
stable_only_on_write_completed ==
    [][state # Stable /\ state' = Stable => Ev.type = "WriteCompleted" \/ Loading]_vars
OnceTags == {ReqTag} \cup {<<k, m>> : k \in {"join", "sync"}, m \in Ids}
answered_once_per_event ==
    [][\A i, j \in Responds : i # j /\ out'[i].to = out'[j].to => out'[i].to \notin OnceTags]_vars
join_ok_current_generation ==
    [][\A i \in Responds : Resp(i).api = "JoinGroup" /\ Resp(i).code = NONE =>
          HeldNext /\ state' \notin {Empty} /\ Resp(i).gen = generation'
          /\ Resp(i).mid \in Range(members') /\ Resp(i).pname = protocolName']_vars
join_ok_leader ==
    [][\A i \in Responds : Resp(i).api = "JoinGroup" /\ Resp(i).code = NONE =>
          /\ Ev.type = "WriteCompleted" \/ Resp(i).leader = leader'
          /\ Resp(i).members # <<>> =>
                Resp(i).mid = leader' /\ {Resp(i).members[k][1] : k \in 1..Len(Resp(i).members)}
                                             = Range(members')]_vars
SyncedMember(i) == IF out'[i].to = ReqTag THEN Ev.mid ELSE out'[i].to[2]
sync_ok_current_assignment ==
    [][\A i \in Responds : Resp(i).api = "SyncGroup" /\ Resp(i).code = NONE =>
          state' = Stable /\ SyncedMember(i) \in Range(members')
          /\ Resp(i).asg = mem'[SyncedMember(i)].asg /\ Resp(i).pname = protocolName']_vars
GroupRecords == {k \in 1..Len(out') : out'[k].c = "Write"}
assignment_write_from_leader ==
    [][Ev.type = "SyncGroup" /\ GroupRecords # {} =>
          state = Completing /\ Ev.mid = leader /\ Ev.gen = generation]_vars
member_id_required_is_pending ==
    [][\A r \in Own : r.api = "JoinGroup" /\ r.code = "MEMBER_ID_REQUIRED" => r.mid \in pending']_vars
join_requires_known_member ==
    [][Ev.type = "JoinGroup" /\ Ev.mid # "" =>
          \A r \in Own : r.code \in {NONE, "MEMBER_ID_REQUIRED"} =>
              Held /\ (Ev.mid \in pending \/ Valid(Ev.mid, Ev.inst))]_vars
heartbeat_requires_valid_member ==
    [][Ev.type = "Heartbeat" =>
          \A r \in OwnResult : r.code \in {NONE, "REBALANCE_IN_PROGRESS"} =>
              /\ Valid(Ev.mid, Ev.inst) /\ Ev.gen = generation
              /\ state \in (IF r.code = NONE THEN {Completing, Stable} ELSE {Preparing})]_vars
sync_requires_valid_member ==
    [][Ev.type = "SyncGroup" =>
          \A r \in Own : r.code = NONE =>
              Valid(Ev.mid, Ev.inst) /\ Ev.gen = generation /\ state \in {Completing, Stable}]_vars
leave_requires_known_member ==
    [][Ev.type = "LeaveGroup" =>
          \A r \in OwnResult : \A k \in 1..Len(r.members) :
              LET x == r.members[k] IN
              x.code = NONE =>
                  Held /\ \/ x.mid = "" /\ x.inst # None /\ StaticOf(Cur, x.inst) # None
                          \/ x.mid \in pending
                          \/ x.mid # "" /\ Valid(x.mid, x.inst)]_vars

(* Spec-only action properties *)
\* A static member joining with an unknown member id always gets the fresh id (KAFKA-8500).
StaticJoinGetsFreshId ==
    [][Ev.type = "JoinGroup" /\ Ev.mid = "" /\ Ev.inst # None /\ Held
       /\ ~(\E r \in Own : r.code # NONE) => StaticNext(Ev.inst) = Ev.uuid]_vars
\* An assignment is stored only when the write carrying it succeeds.
AssignmentOnlyOnWrite ==
    [][\A m \in Ms \cap DOMAIN mem' : mem'[m].asg # "" /\ mem'[m].asg # mem[m].asg =>
          Ev.type = "WriteCompleted" \/ Loading]_vars
\* A static replacement in Stable answers its join only once its write succeeded (KAFKA-10284);
\* a join refused at once (INCONSISTENT_GROUP_PROTOCOL) replaces nobody.
ReplacementAnsweredAfterWrite ==
    [][Ev.type = "JoinGroup" /\ Ev.mid = "" /\ Ev.inst # None /\ state = Stable
       /\ StaticOf(Cur, Ev.inst) # None /\ state' = Stable => \A r \in Own : r.code # NONE]_vars

-----------------------------------------------------------------------------
(* Offsets: action properties *)
\* The result of the OffsetCommit being handled: sent now, held, or riding on its write.
NewWrite == IF Len(writes') > Len(writes) THEN {writes'[Len(writes')]} ELSE {}
CommitResult == OwnResult \cup {w.resp.r : w \in {w \in NewWrite : w.resp # None}}
AcceptedCommit == Ev.type = "OffsetCommit" /\ \E r \in CommitResult : \E j \in 1..Len(r.parts) : r.parts[j][2] = NONE
\* An accepted commit is from the group's current member and generation, outside the sync
\* phase; one without a generation (-1) only to an Empty group (any member) or to a group not
\* held (a "simple" group is created). A fenced member's commit is never acknowledged.
commit_requires_valid_member ==
    [][AcceptedCommit =>
         IF state = Absent THEN Ev.gen < 0
         ELSE IF Ev.gen >= 0 \/ Ev.mid # "" \/ Ev.inst # None
         THEN \/ Valid(Ev.mid, Ev.inst) /\ Ev.gen = generation /\ state \in {Stable, Preparing}
              \/ Ev.gen < 0 /\ state = Empty
         ELSE state = Empty]_vars
\* A commit acknowledged when its write completes is what a plain OffsetFetch reads at once.
AckedCommitReadable ==
    [][Ev.type = "WriteCompleted" /\ writes # <<>> /\ Head(writes).resp # None
       /\ Head(writes).resp.r.api = "OffsetCommit" =>
         \A j \in 1..Len(Head(writes).recs) :
            LET rec == Head(writes).recs[j] IN
            rec.type = "OffsetCommit" =>
                rec.key \in DOMAIN CommittedView([offs |-> offsets', cmt |-> committed']) /\ CommittedView([offs |-> offsets', cmt |-> committed'])[rec.key] = rec.off]_vars
\* A fetch with require_stable is answered only once no write is in flight.
StableFetchAfterWrites ==
    [][Ev.type = "OffsetFetch" /\ Ev.stable /\ writes # <<>> => Own = {}]_vars
-----------------------------------------------------------------------------
(* Every request answered (issue #17 item 6). The coordinator owes an answer to each request it
   has not answered yet: a parked JoinGroup (mem[m].join # "", static replacements included) or
   SyncGroup (mem[m].sync), a result held behind writes (held), a response riding on an in-flight
   write (writes[i].resp) and a DeleteGroups result riding as a write's delete_result callback.
   Each carries the tag of the Respond that will answer it (Coordinator's To): <<"join", m>>,
   <<"sync", m>>, <<api, m>> for held and riding ones, <<"DeleteGroups", "">>; the request being
   handled is answered to ReqTag, or becomes owed under its own tag (OwnTag). Tags of held and
   riding results may repeat (two heartbeats of one member), so requests are counted by tag. *)

JoinTag(m) == <<"join", m>>
SyncTag(m) == <<"sync", m>>
DeleteTag == <<"DeleteGroups", "">>
CountOf(s, P(_)) == Cardinality({i \in 1..Len(s) : P(s[i])})
DeleteResults(ws) ==
    Cardinality(UNION {{<<i, j>> : j \in {j \in 1..Len(ws[i].cbs) : ws[i].cbs[j].k = "delete_result"}}
                       : i \in 1..Len(ws)})
\* Requests tagged t that a state (its mem, held and writes) owes an answer.
Owed(t, mm, hh, ws) ==
      (IF t[1] = "join" /\ t[2] \in DOMAIN mm THEN (IF mm[t[2]].join # "" THEN 1 ELSE 0) ELSE 0)
    + (IF t[1] = "sync" /\ t[2] \in DOMAIN mm THEN (IF mm[t[2]].sync THEN 1 ELSE 0) ELSE 0)
    + CountOf(hh, LAMBDA h : h.to = t)
    + CountOf(ws, LAMBDA w : w.resp # None /\ w.resp.to = t)
    + (IF t = DeleteTag THEN DeleteResults(ws) ELSE 0)
OwedTags(mm, hh, ws) ==
    {JoinTag(m) : m \in {x \in DOMAIN mm : mm[x].join # ""}} \cup {SyncTag(m) : m \in {x \in DOMAIN mm : mm[x].sync}}
    \cup {hh[i].to : i \in 1..Len(hh)} \cup {ws[i].resp.to : i \in {j \in 1..Len(ws) : ws[j].resp # None}}
    \cup (IF DeleteResults(ws) > 0 THEN {DeleteTag} ELSE {})
OwedBefore(t) == Owed(t, mem, held, writes)
OwedAfter(t) == Owed(t, mem', held', writes')
\* Respond commands of this step to t.
Sent(t) == Cardinality({i \in Responds : out'[i].to = t})
IsRequest == Ev.type \in {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DeleteGroups", "OffsetCommit",
                         "OffsetFetch", "OffsetDelete"}
\* The tag the request being handled is owed under when it is not answered at once.
OwnTag ==
    CASE Ev.type = "JoinGroup" -> JoinTag(IF Ev.mid = "" THEN Ev.uuid ELSE Ev.mid)
      [] Ev.type = "SyncGroup" -> SyncTag(Ev.mid)
      [] Ev.type = "Heartbeat" -> <<"Heartbeat", Ev.mid>>
      [] Ev.type = "LeaveGroup" -> LeaveTag(Ev)
      [] Ev.type = "DeleteGroups" -> DeleteTag
      [] Ev.type = "OffsetCommit" -> <<"OffsetCommit", Ev.mid>>
      [] Ev.type \in {"OffsetFetch", "OffsetDelete"} -> <<Ev.type, "">>
\* Kafka's two requests left unanswered (tla/README.md): a member's newer JoinGroup or SyncGroup
\* takes the place of its parked one (contract rule 1(b): the newer one is parked now or was
\* answered NONE), and a member leaving drops its parked SyncGroup.
Superseded(t) ==
    /\ Ev.type \in {"JoinGroup", "SyncGroup"} /\ t = OwnTag
    /\ OwedAfter(t) = 1 \/ \E r \in Own : r.code = NONE
LeftWhileSyncing(t) == Ev.type = "LeaveGroup" /\ t[1] = "sync" /\ t[2] \notin DOMAIN mem'
\* The step answers the request being handled at most once (none for a timer or a write
\* outcome), and for every tag: what was owed plus the request being handled, if it was not
\* answered at once, is answered exactly once in this step or still owed after it. A request
\* that stops being owed without its Respond (a parked member removed unanswered), or a
\* Respond to a tag nothing was owed under, violates it.
AnsweredExactlyOnce ==
    [][LET now == Sent(ReqTag)
           tags == {out'[i].to : i \in Responds} \cup OwedTags(mem, held, writes)
                   \cup OwedTags(mem', held', writes') \cup (IF IsRequest THEN {OwnTag} ELSE {})
       IN /\ now <= (IF IsRequest THEN 1 ELSE 0)
          /\ \A t \in tags \ {ReqTag} :
                LET new == IF IsRequest /\ t = OwnTag THEN 1 - now ELSE 0
                    lost == OwedBefore(t) + new - Sent(t) - OwedAfter(t)
                IN lost = 0 \/ (lost = 1 /\ (Superseded(t) \/ LeftWhileSyncing(t))) \/ Loading]_vars

-----------------------------------------------------------------------------
(* Durability and failover: the log (stored), and the partition loaded again from it *)
\* A commit acknowledged when its write completes is in the log.
acknowledged_commit_durable ==
    [][Ev.type = "WriteCompleted" /\ writes # <<>> /\ Head(writes).resp # None
       /\ Head(writes).resp.r.api = "OffsetCommit" =>
         \A j \in 1..Len(Head(writes).recs) :
            LET rec == Head(writes).recs[j] IN
            rec.type = "OffsetCommit" => rec.key \in DOMAIN stored'.offs /\ stored'.offs[rec.key] = rec.off]_vars
\* Measured, not checked (tla/README.md, Findings): a new coordinator may load an older generation
\* than the one the members were given, and hand the same number out again.
GenerationNotReusedAcrossFailover == [][Loading /\ Held /\ HeldNext => generation' >= generation]_vars
\* Loading again loses nothing the log holds: the committed offsets are the log's, and a group
\* with members comes back Stable with its generation, members, leader and assignments.
reload_restores_the_log ==
    [][Ev.type = "LoadPartition" /\ state = Dead =>
         /\ CommittedView([offs |-> offsets', cmt |-> committed']) =
                (IF stored.grp = None /\ ~stored.simple THEN NoFunction ELSE stored.offs)
         /\ stored.grp # None /\ stored.grp.members # <<>> =>
                /\ state' = Stable /\ generation' = stored.grp.gen /\ leader' = stored.grp.leader
                /\ members' = [i \in 1..Len(stored.grp.members) |-> stored.grp.members[i].id]
                /\ \A i \in 1..Len(stored.grp.members) :
                      mem'[stored.grp.members[i].id].asg = stored.grp.members[i].asg]_vars
ActionProperties ==
    /\ legal_transition /\ dead_is_absorbing /\ generation_monotonic /\ generation_step
    /\ generation_bump_iff_join_completed /\ stable_only_on_write_completed
    /\ answered_once_per_event /\ join_ok_current_generation /\ join_ok_leader
    /\ sync_ok_current_assignment /\ assignment_write_from_leader /\ member_id_required_is_pending
    /\ join_requires_known_member /\ heartbeat_requires_valid_member /\ sync_requires_valid_member
    /\ leave_requires_known_member /\ StaticJoinGetsFreshId /\ AssignmentOnlyOnWrite
    /\ ReplacementAnsweredAfterWrite /\ commit_requires_valid_member /\ AckedCommitReadable
    /\ StableFetchAfterWrites /\ AnsweredExactlyOnce /\ acknowledged_commit_durable /\ reload_restores_the_log

-----------------------------------------------------------------------------
(* Liveness, under LiveSpec (fair timers and writes) *)

PreparingIsLeft == state = Preparing ~> state # Preparing
CompletingSettles == state = Completing ~> state \in {Stable, Preparing, Empty, Dead, Absent}  \* Absent: its creation reverted

\* Every request owed an answer is eventually answered (AnsweredExactlyOnce: a request stops
\* being owed only by its answer, but for Kafka's two exceptions): eventually nothing is owed
\* any more, no parked JoinGroup or SyncGroup, no held result, no result riding on a write.
\* Requests are only made by clients and MaxRequests bounds them, so this means that each one
\* is answered (held and riding results have no identity to follow one by one). Writes
\* themselves need not drain: an expiration tombstone that fails brings the group back, and the
\* next expiration writes another, forever.
Riding(ws) == DeleteResults(ws) > 0 \/ \E i \in 1..Len(ws) : ws[i].resp # None
Owing == (\E m \in DOMAIN mem : mem[m].join # "" \/ mem[m].sync) \/ held # <<>> \/ Riding(writes)
EveryRequestAnswered == Owing ~> ~Owing

-----------------------------------------------------------------------------
(* A group whose members keep heartbeating and rejoining reaches Stable (issue #17 item 6).
   StableSpec: the members are well-behaved clients and the coordinator stays.
   * Each member rejoins in PreparingRebalance, once, with its own member id and instance and
     the protocols and timeouts it joined with (Rejoin), and syncs in CompletingRebalance at
     the group's generation, the leader with an assignment for every member (Resync); both
     weakly fair. They need no budget.
   * Members heartbeat and answer in time: a member's session timer never fires (only the timers
     of ids that are not members: pending members, old ids), the join timer fires only once every
     member has rejoined, the sync timer never fires.
   * The partition is never unloaded; writes complete (weakly fair).
   * Besides, at most MaxRequests disturbances: any request of the unconstrained environment
     (Client: new members, leaves, stale or fenced requests, DeleteGroups) or a failed write.
   ReachesStable: a rebalancing group is eventually Stable, or has no member left (all left or
   were removed by the disturbances). *)

MaxVersion == CHOOSE v \in JoinVersions : \A w \in JoinVersions : w <= v
RejoinDue(m) == state = Preparing /\ m \in Ms /\ mem[m].join = ""
Rejoin(m) ==
    /\ RejoinDue(m) /\ UNCHANGED budget
    /\ JoinGroup([mid |-> m, inst |-> mem[m].inst, ptype |-> protocolType, protos |-> mem[m].protos,
                  rto |-> mem[m].rto, sto |-> mem[m].sto, v |-> MaxVersion, uuid |-> None])
SyncDue(m) == state = Completing /\ m \in pendingSync
Resync(m) ==
    /\ SyncDue(m) /\ UNCHANGED budget
    /\ SyncGroup([mid |-> m, inst |-> mem[m].inst, gen |-> generation, ptype |-> None, pname |-> None,
                  asg |-> IF m = leader THEN [x \in Ms |-> "A"] @@ NoFunction ELSE NoFunction])
AllRejoined == \A m \in Ms : mem[m].join # ""
TimelyJoinTimer == AllRejoined /\ JoinTimer
Disturbance == Client \/ (CanRequest /\ Spend /\ \E e \in WriteErrors : WriteFailed(e))
StableNext ==
    \/ Disturbance
    \/ \E m \in Ids : Rejoin(m) \/ Resync(m)
    \/ /\ UNCHANGED budget
       /\ \/ \E m \in Ids \ Ms : HeartbeatTimer(m)
          \/ TimelyJoinTimer
          \/ \E aged \in AgedChoices(Cur) : ExpireTimer(aged)
          \/ WriteCompleted
StableFairness ==
    /\ \A m \in Ids : []<>~RejoinDue(m) \/ []<><<Rejoin(m)>>_vars
    /\ \A m \in Ids : []<>~SyncDue(m) \/ []<><<Resync(m)>>_vars
    /\ []<>~(JoinKey \in DOMAIN timers /\ AllRejoined) \/ []<><<UNCHANGED budget /\ TimelyJoinTimer>>_vars
    /\ []<>(writes = <<>>) \/ []<><<UNCHANGED budget /\ WriteCompleted>>_vars
StableSpec == Init /\ [][StableNext]_vars /\ StableFairness

ReachesStable == state \in {Preparing, Completing} ~> state = Stable \/ Ms = {}

=============================================================================
