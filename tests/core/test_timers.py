"""The timer table (core/timers.py), both forms: deadline order, equal deadlines in arming order,
a re-armed key at its latest deadline and arming, cancelled keys never; the mutable table fires
exactly as a table with one heap entry per arming would, whatever the mix of pushed-back and
brought-forward deadlines, and the immutable one as the mutable one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.core.commands import (
    CancelPartitionTimers,
    CancelTimer,
    ExpirationTimer,
    HeartbeatTimer,
    JoinTimer,
    Respond,
    SetTimer,
    SyncTimer,
)
from groupcoord.core.timers import Timers, TimerTable

keys = st.tuples(st.integers(0, 2), st.sampled_from("ab"), st.sampled_from("xyz")).map(lambda t: HeartbeatTimer(*t))
steps = st.lists(st.one_of(
    st.tuples(st.just("set"), keys, st.integers(0, 60), st.integers()),
    st.tuples(st.just("cancel"), keys),
    st.tuples(st.just("cancel_partition"), st.integers(0, 2)),
    st.tuples(st.just("advance"), st.integers(0, 15))), max_size=80)


class Reference:
    """One entry per armed key; the earliest (deadline, arming order) fires first."""

    def __init__(self) -> None:
        self.armed: dict = {}
        self.seq = 0

    def apply(self, command) -> None:
        if isinstance(command, SetTimer):
            self.seq += 1
            self.armed[command.key] = (command.deadline_ms, self.seq, command.payload)
        elif isinstance(command, CancelTimer):
            self.armed.pop(command.key, None)
        else:
            self.armed = {k: v for k, v in self.armed.items() if k.partition != command.partition}

    def pop_due(self, now_ms: int):
        due = [(d, s, k) for k, (d, s, _p) in self.armed.items() if d <= now_ms]
        if not due:
            return None
        _d, _s, key = min(due)
        return key, self.armed.pop(key)[2]


def _command(step, now: int):
    return {"set": lambda: SetTimer(step[1], now + step[2], step[3]),
            "cancel": lambda: CancelTimer(step[1]),
            "cancel_partition": lambda: CancelPartitionTimers(step[1])}[step[0]]()


def _pop_all(timers: Timers, now_ms: int) -> tuple[Timers, list]:
    fired = []
    while (due := timers.next()) is not None and due[0] <= now_ms:
        fired.append((due[2], due[3]))
        timers = timers.fired()
    return timers, fired


@settings(max_examples=500, deadline=None)
@given(steps)
def test_fires_as_one_entry_per_arming_would(script):
    table, frozen, reference, now = TimerTable(), Timers(), Reference(), 0
    for step in script:
        if step[0] == "advance":
            now += step[1]
            peeked = table.peek()
            fired, expected = [], []
            while (due := table.pop_due(now)) is not None:
                fired.append(due)
            while (due := reference.pop_due(now)) is not None:
                expected.append(due)
            frozen, fired_frozen = _pop_all(frozen, now)
            assert fired == expected == fired_frozen
            assert all(type(key) is HeartbeatTimer for key, _payload in fired)
            assert not fired or peeked[1:] == fired[0]
        else:
            command = _command(step, now)
            assert table.apply(command)
            reference.apply(command)
            frozen = frozen.applied([command])
        assert len(table) == len(reference.armed) == len(frozen)
        assert table.armed() == {k: (d, p) for k, (d, _s, p) in reference.armed.items()}
        assert dict(table) == table.armed()
        in_order = sorted((d, s, k, p) for k, (d, s, p) in reference.armed.items())
        assert frozen.places() == tuple((d, k) for d, _s, k, _p in in_order)
        earliest = in_order[0] if in_order else None
        assert table.peek() == (None if earliest is None else (earliest[0], earliest[2], earliest[3]))
        wake = table.next_deadline()
        assert (wake is None) == (earliest is None)  # never asleep with a timer armed
        assert wake is None or wake <= earliest[0]  # never late; early wake-ups fire nothing


def test_a_pushed_back_timer_costs_no_heap_entry():
    table = TimerTable()
    key = HeartbeatTimer(0, "g", "m")
    for deadline in range(1000, 2000):
        table.apply(SetTimer(key, deadline))
    assert len(table._heap) == 1
    assert table.pop_due(1998) is None
    assert table.next_deadline() == 1999
    assert table.pop_due(1999) == (key, None)


A, B, C = HeartbeatTimer(0, "g", "a"), HeartbeatTimer(0, "g", "b"), JoinTimer(1, "h")


def _fired(commands: list, now_ms: int) -> tuple[list, list]:
    """What each form fires by ``now_ms`` after ``commands``, in order."""
    table = TimerTable()
    for c in commands:
        table.apply(c)
    mutable = []
    while (due := table.pop_due(now_ms)) is not None:
        mutable.append(due[0])
    _timers, frozen = _pop_all(Timers().applied(commands), now_ms)
    return mutable, [key for key, _payload in frozen]


def test_equal_deadlines_fire_in_arming_order():
    assert _fired([SetTimer(B, 100), SetTimer(A, 100), SetTimer(C, 100)], 100) == ([B, A, C], [B, A, C])
    assert _fired([SetTimer(B, 100), SetTimer(A, 99)], 100) == ([A, B], [A, B])


def test_a_rearmed_key_takes_its_new_deadline_and_a_new_arming_order():
    # pushed back to the deadline another key has: it fires after that key, armed before it
    armed = [SetTimer(A, 50), SetTimer(B, 100), SetTimer(A, 100)]
    assert _fired(armed, 100) == ([B, A], [B, A])
    # brought forward
    assert _fired([SetTimer(A, 100), SetTimer(B, 80), SetTimer(A, 60)], 70) == ([A], [A])
    # re-armed to the same deadline: behind a key armed in between
    assert _fired([SetTimer(A, 100), SetTimer(B, 100), SetTimer(A, 100)], 100) == ([B, A], [B, A])
    table = TimerTable()
    for c in [SetTimer(A, 100, "old"), SetTimer(A, 200, "new")]:
        table.apply(c)
    assert table.pop_due(150) is None and table.pop_due(200) == (A, "new")
    assert Timers().applied([SetTimer(A, 100, "old"), SetTimer(A, 200, "new")]).next()[::2] == (200, A)


def test_cancel_and_cancel_partition():
    armed = [SetTimer(A, 10), SetTimer(B, 20), SetTimer(C, 30)]
    assert _fired(armed + [CancelTimer(A), CancelTimer(SyncTimer(0, "g"))], 100) == ([B, C], [B, C])
    assert _fired(armed + [CancelPartitionTimers(0)], 100) == ([C], [C])
    assert _fired(armed + [CancelPartitionTimers(1), SetTimer(A, 40)], 100) == ([B, A], [B, A])


def test_the_mutable_table_is_the_armed_mapping():
    table = TimerTable()
    assert table.apply(SetTimer(A, 10, 7)) and not table.apply(Respond(1, None))
    assert A in table and tuple(A) in table and B not in table
    assert table.get(A) == table[A] == (10, 7) and table.get(B) is None
    assert list(table) == [A] and type(next(iter(table))) is HeartbeatTimer
    assert table.pop(A) == (10, 7) and table.pop(A) is None and len(table) == 0
    assert table.pop_due(100) is None and table.peek() is None  # popped: its heap entry is dropped
    table.apply(SetTimer(B, 5))
    table.clear()
    assert len(table) == 0 and table.next_deadline() is None


def test_the_immutable_form_is_unchanged_by_other_commands_and_ignores_what_it_is_told_to():
    timers = Timers().applied([SetTimer(A, 10)])
    assert timers.applied([Respond(1, None)]) is timers
    assert timers.applied([SetTimer(ExpirationTimer(0), 5)], ignore=ExpirationTimer) is timers
    later = timers.applied([SetTimer(B, 10)])
    assert (timers.places(), later.places()) == (((10, A),), ((10, A), (10, B)))
    assert later.fired().places() == ((10, B),) and not later.fired().fired()
    assert Timers().applied([SetTimer(A, 10)]) == timers  # a value: equal when armed alike


def test_a_value_table_passes_over_an_ignored_key_and_applies_what_follows():
    from groupcoord.core.commands import ExpirationTimer, HeartbeatTimer, SetTimer
    from groupcoord.core.timers import Timers

    later = HeartbeatTimer(0, "g", "m")
    table = Timers().applied([SetTimer(ExpirationTimer(0), 100), SetTimer(later, 50)], ignore=ExpirationTimer)
    assert [e[2] for e in table.entries] == [later]
