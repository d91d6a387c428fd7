"""The timer table fires exactly as a table with one heap entry per arming would: deadline
order, ties in arming order, a re-armed key at its latest deadline, cancelled keys never,
whatever the mix of pushed-back and brought-forward deadlines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.adapters.runtime.timers import TimerTable
from groupcoord.core.commands import CancelPartitionTimers, CancelTimer, HeartbeatTimer, SetTimer

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


@settings(max_examples=500, deadline=None)
@given(steps)
def test_fires_as_one_entry_per_arming_would(script):
    table, reference, now = TimerTable(), Reference(), 0
    for step in script:
        if step[0] == "advance":
            now += step[1]
            fired, expected = [], []
            while (due := table.pop_due(now)) is not None:
                fired.append(due)
            while (due := reference.pop_due(now)) is not None:
                expected.append(due)
            assert fired == expected
            assert all(type(key) is HeartbeatTimer for key, _payload in fired)
        else:
            command = {"set": lambda: SetTimer(step[1], now + step[2], step[3]),
                       "cancel": lambda: CancelTimer(step[1]),
                       "cancel_partition": lambda: CancelPartitionTimers(step[1])}[step[0]]()
            assert table.apply(command)
            reference.apply(command)
        assert len(table) == len(reference.armed)
        assert table.armed() == {k: (d, p) for k, (d, _s, p) in reference.armed.items()}
        earliest = min((d for d, _s, _p in reference.armed.values()), default=None)
        wake = table.next_deadline()
        assert (wake is None) == (earliest is None)  # never asleep with a timer armed
        assert wake is None or wake <= earliest  # never late; early wake-ups fire nothing


def test_a_pushed_back_timer_costs_no_heap_entry():
    table = TimerTable()
    key = HeartbeatTimer(0, "g", "m")
    for deadline in range(1000, 2000):
        table.apply(SetTimer(key, deadline))
    assert len(table._heap) == 1
    assert table.pop_due(1998) is None
    assert table.next_deadline() == 1999
    assert table.pop_due(1999) == (key, None)
