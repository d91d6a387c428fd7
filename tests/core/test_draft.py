"""The group draft and the model it changes (core/classic/draft.py, core/classic/model.py): the
draft's fields, its bookkeeping on removal, its refusals, and the votes iterated in Java's
HashMap order."""

from __future__ import annotations

import pytest

from groupcoord.core.classic import subscription as cp
from groupcoord.core.errors import Error


def test_a_group_draft_declares_the_group_fields():
    """GroupDraft's annotations (what mypy checks the draft's code against) are Group's fields."""
    import attrs

    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group

    assert list(GroupDraft.__annotations__) == [f.name for f in attrs.fields(Group)]
    assert GroupDraft.__slots__ == tuple(GroupDraft.__annotations__)


def test_assemble_group_sets_the_fields_it_is_given():
    from groupcoord.core.classic.draft import assemble_group
    from groupcoord.core.classic.model import Group, Member

    member = Member("m", None, "c", "/h", 10, 10, "consumer", (("range", cp.encode_subscription(["t"])),))
    group = assemble_group(Group("g", 0, protocol_type="consumer", protocol_name="range", leader_id="m"), [member],
                           pending_members=frozenset({"p"}), new_member_added=True)
    assert group.pending_members == frozenset({"p"}) and group.new_member_added is True
    assert list(group.members) == ["m"] and group.subscribed_topics == frozenset({"t"})


def test_broken_invariants_and_member_errors_say_what_they_are():
    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group, Member, MemberError
    from groupcoord.core.classic.states import STABLE, IllegalTransition

    assert str(MemberError(Error.FENCED_INSTANCE_ID)) == "FENCED_INSTANCE_ID"
    member = Member("m", "i", "c", "/h", 10, 10, "consumer", (("range", b"r"),))
    assert member.metadata("range") == b"r" and member.metadata("other") == b"" and member.metadata(None) == b""
    with pytest.raises(AssertionError, match=r"^member m supports none of \['a', 'b'\]$"):
        member.vote({"b", "a"})
    draft = GroupDraft(Group("g", 0))
    with pytest.raises(AssertionError, match="^cannot select a protocol for empty group g$"):
        draft.select_protocol()
    with pytest.raises(IllegalTransition, match="^group g: .* is not legal$"):
        draft.transition(STABLE, 0)
    draft.add(member)
    with pytest.raises(AssertionError, match="^static member i already in g$"):
        draft.add(Member("n", "i", "c", "/h", 10, 10, "consumer", (("range", b"r"),)))


def test_the_draft_keeps_its_awaiting_join_count_and_pending_sync_on_removal():
    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group, Member, Parked

    draft = GroupDraft(Group("g", 0))
    for n in range(3):
        draft.add(Member(f"m{n}", None, "c", "/h", 10, 10, "consumer", (("range", b""),),
                         awaiting_join=Parked(f"r{n}", 5)))
    draft.pending_sync.update({"m0", "m1", "m2"})
    assert draft.num_awaiting_join == 3
    draft.remove("m1")
    assert draft.num_awaiting_join == 2 and draft.pending_sync == {"m0", "m2"}
    draft.remove("nobody")
    assert draft.num_awaiting_join == 2 and draft.pending_sync == {"m0", "m2"}


def _java_hashmap_iteration(keys: list[str]) -> list[str]:
    """A java.util.HashMap<String, _> filled with ``keys`` in order, iterated: puts append to
    their bin, a resize (past 3/4 full) splits each bin keeping its order, iteration goes bin by bin."""
    from groupcoord.core.partitioning import java_string_hash

    def spread(key):
        h = java_string_hash(key)
        return h ^ (h >> 16)

    table: list[list[str]] = [[] for _ in range(16)]
    size = 0
    for key in keys:
        table[spread(key) & (len(table) - 1)].append(key)
        size += 1
        if size > len(table) * 3 // 4:
            old = len(table)
            bigger: list[list[str]] = [[] for _ in range(2 * old)]
            for index, bin_ in enumerate(table):
                for k in bin_:
                    bigger[index + (old if spread(k) & old else 0)].append(k)
            table = bigger
    return [k for bin_ in table for k in bin_]


@pytest.mark.parametrize("keys", [
    ["q", "b", "a"],  # 'q' and 'a' share a bin of 16 (and not of 32)
    [chr(c) for c in range(ord("z"), ord("m"), -1)],  # 13 keys: one resize, to 32 bins
    [chr(c) for c in range(ord("~"), ord("!"), -1)],  # 93 keys: several resizes
    ["range", "roundrobin", "sticky", "cooperative-sticky", "a", "b"],
    [f"protocol-{n}" for n in range(12)],  # exactly 3/4 of 16: no resize
    list("abcdefghijk") + ["p"],  # 12 keys: no resize, so 'p' (bin 0 of 16, 16 of 32) comes first
    [f"protocol-{n}" for n in range(13)],
    [f"p{n}" for n in range(25)],
])
def test_votes_are_iterated_as_javas_hashmap_does(keys):
    from groupcoord.core.partitioning import java_hashmap_order

    assert java_hashmap_order(list(keys)) == _java_hashmap_iteration(keys)


def test_the_hashmap_model_of_this_test_is_javas():
    # orders a JDK 17 HashMap<String, Integer> iterates, filled in the order given
    assert _java_hashmap_iteration(["q", "b", "a"]) == ["q", "a", "b"]
    assert _java_hashmap_iteration(list("abcdefghijk") + ["p"]) == ["p"] + list("abcdefghijk")
    assert _java_hashmap_iteration(["range", "roundrobin", "sticky", "cooperative-sticky", "a", "b"]) == [
        "a", "b", "sticky", "range", "roundrobin", "cooperative-sticky"]
    assert _java_hashmap_iteration([f"protocol-{n}" for n in range(13)]) == [
        f"protocol-{n}" for n in (6, 5, 8, 7, 9, 0, 2, 10, 1, 11, 4, 12, 3)]
    assert _java_hashmap_iteration([f"p{n}" for n in range(25)]) == [
        f"p{n}" for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 11, 14, 13, 16, 15, 18, 17, 19, 21, 20, 23, 22, 24)]
    assert _java_hashmap_iteration([chr(c) for c in range(ord("~"), ord("!"), -1)]) == [
        chr(c) for c in range(ord('"'), ord("~") + 1)]
