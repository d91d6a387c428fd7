--------------------------- MODULE ConsumerGroup ---------------------------
(***************************************************************************)
(* One KIP-848 consumer group (ConsumerGroupHeartbeat), as Kafka's         *)
(* GroupMetadataManager and CurrentAssignmentBuilder run it and as the     *)
(* core holds it (core/consumer/): the group epoch, the target assignment  *)
(* epoch and the target (any legal function of the members to partitions:  *)
(* the assignor is left open), each member's epoch, previous epoch, state, *)
(* assigned partitions and partitions pending revocation, its rebalance    *)
(* timer; and the clients: what each holds, the epoch it last heard, the   *)
(* assignment it reconciles towards. A client's heartbeat carries its      *)
(* epoch, subscription and owned partitions (stale ones after a lost       *)
(* response); its answer may be lost. Joins (epoch 0), leaves (-1), a      *)
(* static member's temporary leave (-2) and its rejoin under a new member  *)
(* id, session and rebalance timeouts (and a rebalance timeout that was    *)
(* already firing when its timer was replaced) are actions. Disturbances   *)
(* (leaves, crashes, restarts, subscription changes, lost answers, timeouts *)
(* of live members) spend `budget`, so every behaviour ends cooperative.   *)
(* tla/README.md, "The consumer group spec", says what is checked.         *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC

CONSTANTS
    Members,        \* the clients, each one member name (a static one: its instance)
    Static,         \* the members with an instance id
    Partitions,     \* the partitions of the subscribable topics
    TopicOf,        \* [Partitions -> topic]
    Subs,           \* the subscriptions (sets of topics) a client may send
    InitSub,        \* [Members -> Subs]: each client's first subscription
    InitRunning,    \* the clients running (about to join) at the start
    Budget,         \* how many disturbances a behaviour may have
    DeferAssignment,    \* the target may be computed after the heartbeat that bumped the epoch
    LateTimers,         \* a replaced or cancelled rebalance timer may still fire once
    EpochZeroRejoin,    \* KAFKA-19233: an existing member's epoch-0 heartbeat is not fenced
    EmptyCatchesUp,     \* KAFKA-20442: fencing the last member brings the target epoch up
    LeaveRefreshes,     \* a -1 leave recomputes the group's subscribed topics (Kafka's fence)
    Balanced            \* the assignor balances: no member holds two more than one that could take one

ASSUME Static \subseteq Members /\ InitRunning \subseteq Members /\ Budget \in Nat

VARIABLES
    groupEpoch, assignEpoch, gstate, gsubs,      \* the group
    members,                                     \* the member names in the group
    mepoch, mprev, mstate, masg, mpend, msub,    \* each member, as the coordinator holds it
    target,                                      \* the target assignment
    minc,                                        \* a static member's member id (its incarnation, 0 or 1)
    rebTimer, lateTimer,                         \* armed rebalance timer's epoch; a late firing's
    cepoch, cowned, casg, csub, cinc,            \* each client
    budget, removed, out, event                  \* bookkeeping

coord == <<groupEpoch, assignEpoch, gstate, gsubs, members, mepoch, mprev, mstate, masg, mpend,
           msub, target, minc, rebTimer, lateTimer>>
client == <<cepoch, cowned, casg, csub, cinc>>
vars == <<coord, client, budget, removed, out, event>>

NoOne == "-"
Errors == {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID"}
MStates == {"stable", "unrevoked", "unreleased"}

Topics == {TopicOf[p] : p \in Partitions}
SubParts(s) == {p \in Partitions : TopicOf[p] \in s}
Owns(m) == masg[m] \cup mpend[m]
\* The group's subscribed topics: those of its members' subscriptions that exist (Kafka keeps the
\* metadata of existing topics only; a name subscribed to before its topic exists is not one).
SubscribedTopics(M, s) == (UNION {s[m] : m \in M}) \cap Topics
Min(a, b) == IF a < b THEN a ELSE b

\* The group's state, derived from the epochs as ConsumerGroup.state derives it.
Reconciled(m) == mstate[m] = "stable" /\ mepoch[m] = assignEpoch
DerivedState(mem, ge, ae, rec(_)) ==
    IF mem = {} THEN "Empty"
    ELSE IF ge > ae THEN "Assigning"
    ELSE IF \E m \in mem : ~rec(m) THEN "Reconciling"
    ELSE "Stable"

\* Balanced: no member of M holds two more partitions than one that could take one of them.
Even(t, M, s) == \A m1, m2 \in M : Cardinality(t[m1]) >= Cardinality(t[m2]) + 2
                                    => \A p \in t[m1] : TopicOf[p] \notin s[m2]

\* Every legal target over members M subscribing as s: each partition of a subscribed topic goes to
\* exactly one member subscribing to its topic, other partitions to nobody.
LegalTargets(M, s) ==
    LET Owners(p) == IF \E m \in M : TopicOf[p] \in s[m] THEN {m \in M : TopicOf[p] \in s[m]} ELSE {NoOne}
        Choices == {f \in [Partitions -> M \cup {NoOne}] : \A p \in Partitions : f[p] \in Owners(p)}
        Tgt(f) == [m \in Members |-> {p \in Partitions : f[p] = m}]
    IN {t \in {Tgt(f) : f \in Choices} : Balanced => Even(t, M, s)}

\* t \in LegalTargets(M, s), tested instead of enumerated (the enumeration grows as |M|+1 to the
\* number of partitions): trace validation checks the core's own target with it.
IsLegalTarget(t, M, s) ==
    /\ DOMAIN t = Members
    /\ \A m \in Members : t[m] \subseteq Partitions /\ (m \notin M => t[m] = {})
    /\ \A p \in Partitions :
        LET owners == {m \in M : p \in t[m]}
        IN IF \E m \in M : TopicOf[p] \in s[m]
           THEN Cardinality(owners) = 1 /\ \A m \in owners : TopicOf[p] \in s[m]
           ELSE owners = {}
    /\ Balanced => Even(t, M, s)

(***************************************************************************)
(* CurrentAssignmentBuilder: one member's next state. r: [ep, prev, st,    *)
(* asg, pend]; tEp, tgt: the target epoch and the member's target; subd:   *)
(* the partitions of the topics it subscribes to; others: the partitions   *)
(* other members own (assigned or pending revocation); owned: what its     *)
(* heartbeat reported.                                                     *)
(***************************************************************************)
Moved(r, ep, st, asg, pend) == [ep |-> ep, prev |-> r.ep, st |-> st, asg |-> asg, pend |-> pend]

NextAssignment(r, ep, tEp, tgt, subd, others, owned) ==
    LET wanted == tgt \cap subd
        kept == r.asg \cap wanted
        gone == r.asg \ kept
        \* a partition is assigned only once its previous owner released it
        new == {p \in wanted \ kept : p \notin others \/ p \in r.pend}
        unreleased == new # wanted \ kept
    IN IF gone # {} /\ gone \cap owned # {}
       THEN Moved(r, ep, "unrevoked", kept, gone)              \* revoke first, in the same epoch
       ELSE Moved(r, tEp, IF unreleased THEN "unreleased" ELSE "stable", kept \cup new, {})

\* updateCurrentAssignment: topics no longer subscribed leave the assignment at once.
DropUnsubscribed(r, subd, owned) ==
    LET asg == r.asg \cap subd
        pend == r.pend \cup (r.asg \ subd)
    IN IF asg = r.asg THEN r
       ELSE IF pend # {} /\ pend \cap owned # {}
            THEN [r EXCEPT !.st = "unrevoked", !.asg = asg, !.pend = pend]
            ELSE [r EXCEPT !.asg = asg]

Reconcile(r, tEp, tgt, subd, others, owned, subChanged) ==
    CASE r.st = "stable" ->
            IF r.ep # tEp THEN NextAssignment(r, r.ep, tEp, tgt, subd, others, owned)
            ELSE IF subChanged THEN DropUnsubscribed(r, subd, owned) ELSE r
      [] r.st = "unrevoked" ->
            IF r.pend \cap owned # {}
            THEN IF subChanged THEN DropUnsubscribed(r, subd, owned) ELSE r
            \* revoked: on to the next epoch, never past the target epoch
            ELSE NextAssignment(r, Min(r.ep + 1, tEp), tEp, tgt, subd, others, owned)
      [] r.st = "unreleased" -> NextAssignment(r, r.ep, tEp, tgt, subd, others, owned)

Mem(m) == [ep |-> mepoch[m], prev |-> mprev[m], st |-> mstate[m], asg |-> masg[m], pend |-> mpend[m]]
Fresh == [ep |-> 0, prev |-> 0, st |-> "stable", asg |-> {}, pend |-> {}]

SetMember(m, r) ==
    /\ mepoch' = [mepoch EXCEPT ![m] = r.ep]
    /\ mprev' = [mprev EXCEPT ![m] = r.prev]
    /\ mstate' = [mstate EXCEPT ![m] = r.st]
    /\ masg' = [masg EXCEPT ![m] = r.asg]
    /\ mpend' = [mpend EXCEPT ![m] = r.pend]

\* A rebalance timer armed (epoch e > 0) or cancelled (0): the one it replaces may be firing already.
SetRebTimer(m, e) ==
    /\ rebTimer' = [rebTimer EXCEPT ![m] = e]
    /\ lateTimer' = IF LateTimers /\ rebTimer[m] # 0 /\ rebTimer[m] # e
                    THEN [lateTimer EXCEPT ![m] = rebTimer[m]] ELSE lateTimer

Spend(cost) == /\ budget >= cost
               /\ budget' = budget - cost

Init ==
    /\ groupEpoch = 0 /\ assignEpoch = 0 /\ gstate = "Empty" /\ gsubs = {}
    /\ members = {}
    /\ mepoch = [m \in Members |-> 0] /\ mprev = [m \in Members |-> 0]
    /\ mstate = [m \in Members |-> "stable"] /\ masg = [m \in Members |-> {}]
    /\ mpend = [m \in Members |-> {}] /\ msub = [m \in Members |-> {}]
    /\ target = [m \in Members |-> {}] /\ minc = [m \in Members |-> 0]
    /\ rebTimer = [m \in Members |-> 0] /\ lateTimer = [m \in Members |-> 0]
    /\ cepoch = [m \in Members |-> IF m \in InitRunning THEN 0 ELSE -1]
    /\ cowned = [m \in Members |-> {}] /\ casg = [m \in Members |-> {}]
    /\ csub = InitSub /\ cinc = [m \in Members |-> 0]
    /\ budget = Budget /\ removed = [m \in Members |-> FALSE]
    /\ out = <<>> /\ event = <<"Init">>

(***************************************************************************)
(* Removing a member (consumerGroupFenceMember): its records go, the group *)
(* epoch is bumped; refresh: the subscribed topics are computed again.     *)
(***************************************************************************)
Fence(m, refresh) ==
    LET rest == members \ {m}
        ge == groupEpoch + 1
        ae == IF EmptyCatchesUp /\ rest = {} THEN ge ELSE assignEpoch
    IN
    /\ members' = rest
    /\ groupEpoch' = ge
    /\ assignEpoch' = ae
    /\ gsubs' = IF refresh THEN SubscribedTopics(rest, msub) ELSE gsubs
    /\ SetMember(m, Fresh)
    /\ msub' = [msub EXCEPT ![m] = {}]
    /\ target' = [target EXCEPT ![m] = {}]
    /\ minc' = [minc EXCEPT ![m] = 0]
    /\ rebTimer' = [rebTimer EXCEPT ![m] = 0]
    /\ lateTimer' = [lateTimer EXCEPT ![m] = 0]   \* a late firing finds no member: nothing
    /\ gstate' = DerivedState(rest, ge, ae, LAMBDA o : mstate[o] = "stable" /\ mepoch[o] = ae)
    /\ removed' = [removed EXCEPT ![m] = TRUE]

Alive(m) == cepoch[m] >= 0 /\ cinc[m] = minc[m]   \* the member's own client is running

(***************************************************************************)
(* Heartbeat(m, lost): client m sends its epoch, subscription and owned    *)
(* partitions; the coordinator answers; the answer reaches the client      *)
(* unless lost.                                                            *)
(***************************************************************************)
ClientHears(m, r, lost) ==
    IF lost THEN UNCHANGED <<cepoch, cowned, casg>>
    ELSE IF r.code = "NONE"
         THEN /\ cepoch' = [cepoch EXCEPT ![m] = r.ep]
              /\ casg' = [casg EXCEPT ![m] = r.asg]
              /\ UNCHANGED cowned
         ELSE IF r.code \in {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"}
         THEN /\ cepoch' = [cepoch EXCEPT ![m] = 0]         \* abandon everything and rejoin
              /\ cowned' = [cowned EXCEPT ![m] = {}]
              /\ casg' = [casg EXCEPT ![m] = {}]
         ELSE /\ cepoch' = [cepoch EXCEPT ![m] = -1]        \* fatal for the client
              /\ cowned' = [cowned EXCEPT ![m] = {}]
              /\ casg' = [casg EXCEPT ![m] = {}]

Refused(m, e, code, lost) ==
    /\ out' = [code |-> code, ep |-> 0, asg |-> {}]
    /\ ClientHears(m, out', lost)
    /\ UNCHANGED <<coord, csub, cinc, removed>>

EpochFenced(m, e, owned) ==
    \/ e > mepoch[m]
    \/ e < mepoch[m] /\ (e # mprev[m] \/ ~(owned \subseteq masg[m]))

Accept(m, e, s, owned, replace, lost) ==
    LET isNew == m \notin members
        base == IF isNew THEN Fresh ELSE IF replace THEN [Mem(m) EXCEPT !.ep = 0, !.prev = 0] ELSE Mem(m)
        subChanged == s # (IF isNew THEN {} ELSE msub[m])
        mem2 == members \cup {m}
        subs2 == [msub EXCEPT ![m] = s]
        gsubs2 == SubscribedTopics(mem2, subs2)
        ge == IF groupEpoch = 0 \/ subChanged \/ gsubs2 # gsubs THEN groupEpoch + 1 ELSE groupEpoch
        others == UNION {Owns(o) : o \in mem2 \ {m}}
        timer0 == IF replace THEN 0 ELSE rebTimer[m]   \* the old member id's timers find nobody
    IN
    \E assign \in (IF ge > assignEpoch THEN (IF DeferAssignment THEN BOOLEAN ELSE {TRUE}) ELSE {FALSE}) :
    \E tgt \in (IF assign THEN LegalTargets(mem2, subs2) ELSE {target}) :
        LET ae == IF assign THEN ge ELSE assignEpoch
            go == ~(base.st = "stable" /\ base.ep = ae) \/ subChanged
            r == IF go THEN Reconcile(base, ae, tgt[m], SubParts(s), others, owned, subChanged) ELSE base
            rec(o) == IF o = m THEN r.st = "stable" /\ r.ep = ae ELSE mstate[o] = "stable" /\ mepoch[o] = ae
        IN
        /\ members' = mem2
        /\ groupEpoch' = ge
        /\ assignEpoch' = ae
        /\ target' = tgt
        /\ gsubs' = gsubs2
        /\ msub' = subs2
        /\ minc' = [minc EXCEPT ![m] = cinc[m]]
        /\ SetMember(m, r)
        /\ IF r # base
           THEN /\ rebTimer' = [rebTimer EXCEPT ![m] = IF r.st = "unrevoked" THEN r.ep ELSE 0]
                /\ lateTimer' = IF LateTimers /\ timer0 # 0 /\ timer0 # rebTimer'[m]
                                THEN [lateTimer EXCEPT ![m] = timer0]
                                ELSE IF replace THEN [lateTimer EXCEPT ![m] = 0] ELSE lateTimer
           ELSE /\ rebTimer' = [rebTimer EXCEPT ![m] = timer0]
                /\ lateTimer' = IF replace THEN [lateTimer EXCEPT ![m] = 0] ELSE lateTimer
        /\ gstate' = DerivedState(mem2, ge, ae, rec)
        /\ out' = [code |-> "NONE", ep |-> r.ep, asg |-> r.asg]
        /\ removed' = [removed EXCEPT ![m] = FALSE]
        /\ ClientHears(m, out', lost)
        /\ UNCHANGED <<csub, cinc>>

Heartbeat(m, lost) ==
    LET e == cepoch[m]
        s == csub[m]
        owned == cowned[m]
    IN
    /\ e >= 0
    /\ lost => budget > 0
    /\ budget' = IF lost THEN budget - 1 ELSE budget
    /\ event' = <<"Heartbeat", m, e, lost>>
    /\ IF m \in Static
       THEN IF e = 0
            THEN IF m \notin members THEN Accept(m, e, s, owned, FALSE, lost)
                 ELSE IF mepoch[m] # -2 THEN Refused(m, e, "UNRELEASED_INSTANCE_ID", lost)
                 ELSE Accept(m, e, s, owned, TRUE, lost)
            ELSE IF m \notin members THEN Refused(m, e, "UNKNOWN_MEMBER_ID", lost)
                 ELSE IF minc[m] # cinc[m] THEN Refused(m, e, "FENCED_INSTANCE_ID", lost)
                 ELSE IF EpochFenced(m, e, owned) THEN Refused(m, e, "FENCED_MEMBER_EPOCH", lost)
                 ELSE Accept(m, e, s, owned, FALSE, lost)
       ELSE IF m \notin members
            THEN IF e = 0 THEN Accept(m, e, s, owned, FALSE, lost)
                 ELSE Refused(m, e, "UNKNOWN_MEMBER_ID", lost)
            ELSE IF ~(e = 0 /\ EpochZeroRejoin) /\ EpochFenced(m, e, owned)
                 THEN Refused(m, e, "FENCED_MEMBER_EPOCH", lost)
                 ELSE Accept(m, e, s, owned, FALSE, lost)

\* A dynamic member leaves for good (epoch -1); the client closes whatever the answer.
Leave(m) ==
    /\ m \notin Static
    /\ cepoch[m] > 0
    /\ Spend(1)
    /\ event' = <<"Leave", m>>
    /\ cepoch' = [cepoch EXCEPT ![m] = -1]
    /\ cowned' = [cowned EXCEPT ![m] = {}]
    /\ casg' = [casg EXCEPT ![m] = {}]
    /\ UNCHANGED <<csub, cinc>>
    /\ IF m \in members
       THEN /\ Fence(m, LeaveRefreshes)
            /\ out' = [code |-> "NONE", ep |-> -1, asg |-> {}]
       ELSE /\ out' = [code |-> "UNKNOWN_MEMBER_ID", ep |-> 0, asg |-> {}]
            /\ UNCHANGED <<coord, removed>>

\* A static member leaves for now (epoch -2): it keeps its place and partitions, no rebalance.
StaticLeave(m) ==
    /\ m \in Static
    /\ cepoch[m] > 0
    /\ Spend(1)
    /\ event' = <<"StaticLeave", m>>
    /\ cepoch' = [cepoch EXCEPT ![m] = -2]
    /\ cowned' = [cowned EXCEPT ![m] = {}]
    /\ casg' = [casg EXCEPT ![m] = {}]
    /\ UNCHANGED <<csub, cinc, removed>>
    /\ IF m \notin members
       THEN /\ out' = [code |-> "UNKNOWN_MEMBER_ID", ep |-> 0, asg |-> {}]
            /\ UNCHANGED coord
       ELSE IF minc[m] # cinc[m]
       THEN /\ out' = [code |-> "FENCED_INSTANCE_ID", ep |-> 0, asg |-> {}]
            /\ UNCHANGED coord
       ELSE /\ mepoch' = [mepoch EXCEPT ![m] = -2]
            /\ mpend' = [mpend EXCEPT ![m] = {}]
            /\ gstate' = DerivedState(members, groupEpoch, assignEpoch,
                                      LAMBDA o : IF o = m THEN FALSE ELSE Reconciled(o))
            /\ out' = [code |-> "NONE", ep |-> -2, asg |-> {}]
            /\ UNCHANGED <<groupEpoch, assignEpoch, gsubs, members, mprev, mstate, masg, msub,
                           target, minc, rebTimer, lateTimer>>

\* The session timer: any member may expire (time is abstract). One whose client is gone is no
\* disturbance; fencing a live one is.
SessionTimeout(m) ==
    /\ m \in members
    /\ Spend(IF Alive(m) THEN 1 ELSE 0)
    /\ event' = <<"SessionTimeout", m>>
    /\ Fence(m, TRUE)
    /\ out' = <<>>
    /\ UNCHANGED client

\* The rebalance timer fires with the epoch it was armed with: it fences the member only if the
\* member is still in that epoch (it did not revoke in time). Timing out a live client is a
\* disturbance; a member whose client is gone (e.g. away after a -2 leave) is not.
TimerFires(m, e, late) ==
    /\ Spend(IF Alive(m) THEN 1 ELSE 0)
    /\ event' = <<IF late THEN "LateRebalanceTimeout" ELSE "RebalanceTimeout", m, e>>
    /\ out' = <<>>
    /\ UNCHANGED client
    /\ IF m \in members /\ mepoch[m] = e
       THEN Fence(m, TRUE)
       ELSE /\ IF late THEN lateTimer' = [lateTimer EXCEPT ![m] = 0] /\ UNCHANGED rebTimer
                       ELSE rebTimer' = [rebTimer EXCEPT ![m] = 0] /\ UNCHANGED lateTimer
            /\ UNCHANGED <<groupEpoch, assignEpoch, gstate, gsubs, members, mepoch, mprev, mstate,
                           masg, mpend, msub, target, minc, removed>>

RebalanceTimeout(m) == rebTimer[m] # 0 /\ TimerFires(m, rebTimer[m], FALSE)
LateRebalanceTimeout(m) == lateTimer[m] # 0 /\ TimerFires(m, lateTimer[m], TRUE)

\* The target computed after the heartbeat that bumped the group epoch (DeferAssignment).
ComputeAssignment ==
    /\ DeferAssignment
    /\ groupEpoch > assignEpoch
    /\ members # {}
    /\ \E tgt \in LegalTargets(members, msub) :
        /\ target' = tgt
        /\ assignEpoch' = groupEpoch
        /\ gstate' = DerivedState(members, groupEpoch, groupEpoch,
                                  LAMBDA o : mstate[o] = "stable" /\ mepoch[o] = groupEpoch)
    /\ event' = <<"ComputeAssignment">>
    /\ out' = <<>>
    /\ UNCHANGED <<groupEpoch, gsubs, members, mepoch, mprev, mstate, masg, mpend, msub, minc,
                   rebTimer, lateTimer, client, budget, removed>>

(***************************************************************************)
(* The clients' own steps.                                                 *)
(***************************************************************************)
\* The client reconciles to the assignment it heard (revoking, then taking the new partitions; its
\* heartbeats until then report what it held).
ClientReconcile(m) ==
    /\ cepoch[m] > 0
    /\ cowned[m] # casg[m]
    /\ cowned' = [cowned EXCEPT ![m] = casg[m]]
    /\ event' = <<"ClientReconcile", m>>
    /\ out' = <<>>
    /\ UNCHANGED <<coord, cepoch, casg, csub, cinc, budget, removed>>

ChangeSubscription(m) ==
    /\ cepoch[m] >= 0
    /\ Spend(1)
    /\ \E s \in Subs \ {csub[m]} : csub' = [csub EXCEPT ![m] = s]
    /\ event' = <<"ChangeSubscription", m>>
    /\ out' = <<>>
    /\ UNCHANGED <<coord, cepoch, cowned, casg, cinc, removed>>

\* The client process dies without a word.
Crash(m) ==
    /\ cepoch[m] >= 0
    /\ Spend(1)
    /\ cepoch' = [cepoch EXCEPT ![m] = -1]
    /\ cowned' = [cowned EXCEPT ![m] = {}]
    /\ casg' = [casg EXCEPT ![m] = {}]
    /\ event' = <<"Crash", m>>
    /\ out' = <<>>
    /\ UNCHANGED <<coord, csub, cinc, removed>>

\* A client starts again; a static one under a new member id, its instance id the same.
Restart(m) ==
    /\ cepoch[m] < 0
    /\ Spend(1)
    /\ cepoch' = [cepoch EXCEPT ![m] = 0]
    /\ cinc' = IF m \in Static THEN [cinc EXCEPT ![m] = 1 - cinc[m]] ELSE cinc
    /\ event' = <<"Restart", m>>
    /\ out' = <<>>
    /\ UNCHANGED <<coord, cowned, casg, csub, removed>>

Next ==
    \/ \E m \in Members, lost \in BOOLEAN : Heartbeat(m, lost)
    \/ \E m \in Members :
        \/ Leave(m) \/ StaticLeave(m) \/ SessionTimeout(m)
        \/ RebalanceTimeout(m) \/ LateRebalanceTimeout(m)
        \/ ClientReconcile(m) \/ ChangeSubscription(m) \/ Crash(m) \/ Restart(m)
    \/ ComputeAssignment

Spec == Init /\ [][Next]_vars

\* Cooperative clients in the end: answers that arrive, clients that reconcile, assignments
\* computed, and the sessions of members whose client is gone expire.
SilentExpiry(m) == ~Alive(m) /\ SessionTimeout(m)
Fairness ==
    /\ \A m \in Members : WF_vars(Heartbeat(m, FALSE)) /\ WF_vars(ClientReconcile(m)) /\ WF_vars(SilentExpiry(m))
    /\ WF_vars(ComputeAssignment)
LiveSpec == Spec /\ Fairness

(***************************************************************************)
(* Properties.                                                             *)
(***************************************************************************)
TypeOK ==
    /\ groupEpoch \in Nat /\ assignEpoch \in Nat /\ members \subseteq Members
    /\ gstate \in {"Empty", "Assigning", "Reconciling", "Stable"}
    /\ mstate \in [Members -> MStates]
    /\ \A m \in Members : masg[m] \subseteq Partitions /\ mpend[m] \subseteq Partitions
                          /\ target[m] \subseteq Partitions /\ cowned[m] \subseteq Partitions
    /\ budget \in 0..Budget

\* No partition has two owners among the members' current assignments (assigned or pending revocation).
NoDoubleOwnership ==
    \A m1, m2 \in members : m1 # m2 => Owns(m1) \cap Owns(m2) = {}

\* No member epoch is ahead of the target epoch, nor the target epoch ahead of the group epoch.
EpochsOrdered ==
    /\ assignEpoch <= groupEpoch
    /\ \A m \in members : mepoch[m] <= assignEpoch

\* The state the group reports agrees with its epochs: Stable only when every member reached the
\* target of the current group epoch, Empty exactly when it has no members.
StateAgrees ==
    /\ gstate = "Stable" => groupEpoch = assignEpoch /\ members # {} /\ \A m \in members : Reconciled(m)
    /\ (gstate = "Empty") <=> (members = {})

\* KAFKA-20442: an empty group's target epoch is its group epoch.
EmptyEpochsMatch == members = {} => groupEpoch = assignEpoch

\* Partitions pending revocation are never in the member's assignment; the assignment is in the
\* member's subscription once reconciled.
PendingDisjoint == \A m \in members : masg[m] \cap mpend[m] = {}

\* A heartbeat from a member the coordinator removed (fenced, timed out, replaced) with a nonzero
\* epoch is answered with an error that makes it abandon its partitions.
FencedToldSo ==
    [][event'[1] = "Heartbeat" /\ event'[3] > 0 /\ removed[event'[2]]
       => out'.code \in {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"}]_vars

\* A rebalance timeout removes only a member that did not revoke in time: still revoking, in the
\* epoch the timer was armed for.
RebalanceFencesLaggardsOnly ==
    [][(event'[1] \in {"RebalanceTimeout", "LateRebalanceTimeout"} /\ event'[2] \in members
        /\ event'[2] \notin members')
       => mepoch[event'[2]] = event'[3] /\ mstate[event'[2]] = "unrevoked"]_vars

\* A static member's temporary leave keeps its place and partitions and bumps nothing.
StaticLeaveKeepsPlace ==
    [][(event'[1] = "StaticLeave" /\ out'.code = "NONE")
       => /\ event'[2] \in members' /\ masg'[event'[2]] = masg[event'[2]]
          /\ groupEpoch' = groupEpoch /\ target' = target]_vars

\* Member epochs only move forward, except to -2 (temporary leave) and 0 (a static rejoin).
EpochsForward ==
    [][\A m \in members \cap members' : mepoch'[m] >= mepoch[m] \/ mepoch'[m] \in {-2, 0}]_vars

\* Liveness: in the end every running client is a member holding exactly its target, and the group
\* is Stable (or Empty).
Converged ==
    /\ groupEpoch = assignEpoch
    /\ \A m \in members : Reconciled(m) /\ masg[m] = target[m] /\ mpend[m] = {}
    /\ \A m \in Members : cepoch[m] >= 0 =>
            m \in members /\ minc[m] = cinc[m] /\ cowned[m] = masg[m] /\ cepoch[m] = mepoch[m]
EventuallyConverged == <>[]Converged

\* What TLC compares states by: not the last answer nor the event.
View == <<coord, client, budget, removed>>
=============================================================================
