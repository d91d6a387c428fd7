---------------------------- MODULE MCConsumer ----------------------------
(***************************************************************************)
(* Constants for TLC's runs of ConsumerGroup (MCConsumer*.cfg).            *)
(***************************************************************************)
EXTENDS ConsumerGroup

\* Two topics of one partition each; a client subscribes to both or to "a" alone.
TwoMembers == {"m1", "m2"}
ThreeMembers == {"m1", "m2", "m3"}
StaticM2 == {"m2"}
NoStatic == {}
TwoParts == {"a0", "b0"}
ThreeParts == {"a0", "a1", "b0"}
TopicOfParts == [p \in {"a0", "a1", "b0"} |-> IF p = "b0" THEN "b" ELSE "a"]
TwoSubs == {{"a", "b"}, {"a"}}
ThreeSubs == {{"a", "b"}, {"a"}, {"b"}}
OneMember == {"m1"}
SubAB1 == [m \in OneMember |-> {"a", "b"}]
SubAB2 == [m \in TwoMembers |-> {"a", "b"}]
SubAB3 == [m \in ThreeMembers |-> {"a", "b"}]
TopicOf2 == [p \in TwoParts |-> TopicOfParts[p]]
TopicOf3 == [p \in ThreeParts |-> TopicOfParts[p]]
=============================================================================
