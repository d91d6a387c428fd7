"""The core loop: one ``Coordinator`` at a time, the ``CommandRunner`` carrying out its
commands, and the alarm that fires its timers.

Every event goes through ``dispatch``: the core handles it, ``Respond`` goes to the replies,
``Write`` to the storage pipeline, timer commands to the runner's ``TimerTable``; then the
outcomes of finished writes are fed back in write order and the alarm is set to the next
deadline (a real clock only: on a manual clock time moves by the test controls, and timers
due at the current time fire at once if the clock says so).
Each event handled is counted (``events_handled``) and told to the server's ``watch.Changes``:
tests wait on the core's state, its timers included, rather than sleeping.

A failed core is not used again. An exception inside ``Coordinator.handle`` (a bug) may have
left the instance half-updated, and the instance refuses every later event
(``CoordinatorFailed``), so the loop replaces it at once, inside the call that failed
(``_replace_failed``):

* every request the failed instance held is answered with Kafka's retriable NOT_COORDINATOR,
  in its API's own error shape (``answer_parked``, the replies'): parked JoinGroup/SyncGroup,
  answers held behind writes, the request that raised. Clients look the coordinator up again
  and retry, as after a coordinator moved;
* its writes in flight are forgotten (the pipeline's epoch): their outcomes never reach the
  new instance. A write the storage still completes is read back by the reload; one it
  drops was never acknowledged (its client got NOT_COORDINATOR);
* its timers go with its runner (a new ``TimerTable``) and the alarm is cancelled;
* a new ``Coordinator`` starts, and each partition the failed one owned is loaded again from
  storage through the ownership path's load (``reload_partitions``, the partitions'): marked
  loading at once (requests get the retriable COORDINATOR_LOAD_IN_PROGRESS), read once the
  failed instance's writes have their outcomes, so every acknowledged write comes back. The
  partition of a failed LoadPartition or UnloadPartition is not loaded again (its records
  would fail the next instance too; its ownership was going);
* one ``core_error`` line tells the event, the error, what was answered and reloaded.

Nothing else sees the failure: the request handler, the timers and the write outcomes carry
on with the new instance.

KIP-848's consumer groups assign partitions on the server, from the topics image the core is
fed as ``TopicsChanged`` (``topics``: the catalog's topics as ``(name, topic id, partitions)``):
every instance gets it when it starts, before any other event, and again whenever the image
changes (``topics_changed``: a topic auto-created). A core that does not handle an event kind
yet (``core_handles``) is never fed one: the request handler answers such requests itself.
"""

from __future__ import annotations

import traceback
from functools import lru_cache
from typing import Any, Callable

from groupcoord.adapters.runtime.alarm import Alarm
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.wire.kafka_lines import KafkaGroupLog
from groupcoord.adapters.wire.log import GroupStateLog
from groupcoord.adapters.wire.watch import Changes
from groupcoord.core import events as ev
from groupcoord.core.commands import Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, CoordinatorFailed
from groupcoord.core.errors import Error
from groupcoord.core.timers import TimerTable

_SAMPLES: dict[type, Any] = {
    ev.TopicsChanged: ev.TopicsChanged(now_ms=0, topics=()),
    ev.ConsumerGroupHeartbeat: ev.ConsumerGroupHeartbeat(request_id=None, now_ms=0, version=1, group_id="g",
                                                         member_id="m", member_epoch=0),
    ev.ConsumerGroupDescribe: ev.ConsumerGroupDescribe(request_id=None, now_ms=0, version=1, group_ids=("g",)),
}


@lru_cache(maxsize=None)
def core_handles(kind: type) -> bool:
    """Whether ``Coordinator.handle`` takes events of ``kind`` (KIP-848's are being added to the
    core): a throwaway instance is given a sample; one that has no handler for the kind fails
    with the KeyError of its handler table. Only the public interface is used."""
    try:
        Coordinator(CoordinatorConfig()).handle(_SAMPLES[kind])
    except CoordinatorFailed as e:
        cause = e.__cause__
        return not (isinstance(cause, KeyError) and cause.args == (kind,))
    return True


TopicsImage = tuple  # ((name, topic id as str(uuid), partition count), ...), sorted by name


class CoreLoop:
    def __init__(self, config: CoordinatorConfig, clock: Any, log: Any, pipeline: Any,
                 respond: Callable[[Any, Any], None], recorder: Any = None, changes: Changes | None = None,
                 kafka_log: KafkaGroupLog | None = None, topics: Callable[[], TopicsImage] | None = None) -> None:
        self.config = config
        self.changes = changes if changes is not None else Changes()
        self.events_handled = 0  # by every coordinator instance of this loop
        self.clock = clock
        self.log = log
        self.pipeline = pipeline
        self.respond = respond
        self.recorder = recorder  # the trace's InstanceRecorder, or None
        self.groups = GroupStateLog(log)
        # Why each group changed, as Kafka's broker logs it: to the --kafka-log file if there is
        # one, and the reasons into the ``group`` lines
        self.kafka_log = kafka_log if kafka_log is not None else KafkaGroupLog(None)
        self._reasons: dict[str, str] = {}
        self.coordinator: Coordinator | None = None  # with its runner, by start()
        self.runner: CommandRunner | None = None
        self.timers = TimerTable()
        self.closing = False  # set by the server's shutdown: no new alarms
        self._alarm = Alarm(self.clock, self._on_alarm)
        # Given by the server, for a failed instance's replacement: answer every request it
        # holds with an error (returns how many), and load partitions again from storage.
        self.answer_parked: Callable[[Error], int] | None = None
        self.reload_partitions: Callable[[set[int]], None] | None = None
        self.replaced = 0  # failed instances replaced so far
        self.topics = topics  # the topics image the core is fed (None: none)
        self._topics_fed: TopicsImage | None = None  # the image the current instance was last given

    def start(self, config: CoordinatorConfig | None = None) -> None:
        """A fresh coordinator instance (on ``config``, if given), and the runner that carries
        out its commands."""
        if config is not None:
            self.config = config
        self.coordinator = Coordinator(self.config)
        observe = self.recorder.observe if self.recorder is not None else None
        self.runner = CommandRunner(self.coordinator, self.respond, self._store, observe,
                                    handle=self._guarded_handle)
        self.timers = self.runner.timers
        self.groups.reset()
        self.kafka_log.reset()
        self._topics_fed = None
        self.topics_changed()

    def topics_changed(self) -> None:
        """Feed the core the topics image if it differs from the one it was last given (each
        new instance: always, first)."""
        if self.topics is None or not core_handles(ev.TopicsChanged):
            return
        image = self.topics()
        if image == self._topics_fed:
            return
        self._topics_fed = image
        self.dispatch(ev.TopicsChanged(now_ms=self.clock.now_ms(), topics=image))

    def dispatch(self, event: Any) -> None:
        """Handle ``event``, feed the write outcomes known by now, set the alarm."""
        self.handle(event)
        self.drain_writes()
        self.set_alarm()

    def handle(self, event: Any) -> None:
        try:
            self.runner.feed(event)
        except CoordinatorFailed as e:
            self._replace_failed(e)
            return
        finally:
            self.events_handled += 1
            self.changes.changed()
        if self.log.threshold <= 20:
            reasons, self._reasons = self._reasons, {}
            self.groups.note(event, self.coordinator, reasons)

    def _explaining(self) -> bool:
        return self.kafka_log.stream is not None or self.log.threshold <= 20

    def _guarded_handle(self, event: Any) -> list:
        seen = None
        if self._explaining():
            try:
                seen = self.kafka_log.before(event, self.coordinator)
            except Exception as e:
                self._kafka_log_failed(event, e)
        commands = self.coordinator.handle(event)  # CoordinatorFailed: handle() replaces the instance
        if seen is not None:
            try:
                reasons = self.kafka_log.after(event, self.coordinator, seen, commands)
                if reasons and self.log.threshold <= 20:
                    self._reasons.update(reasons)
            except Exception as e:
                self._kafka_log_failed(event, e)
        return commands

    def _kafka_log_failed(self, event: Any, e: Exception) -> None:
        """The core's step stands; only its telling failed (a bug here, logged once per event)."""
        self.log("error", "kafka_log_error", event_type=type(event).__name__, error=f"{type(e).__name__}: {e}",
                 traceback=traceback.format_exc()[-4000:])

    def _replace_failed(self, error: CoordinatorFailed) -> None:
        """The instance failed (see the module doc): answer what it held, drop it with its
        writes in flight and its timers, start a new one, load its partitions again."""
        failed = self.coordinator
        event = failed.failed if failed.failed is not None else error.event
        owned = set(failed.owned_partitions())  # only loads and unloads change it, each whole but the failed one
        dropped = None
        if isinstance(event, (ev.LoadPartition, ev.UnloadPartition)):
            owned.discard(event.partition)
            dropped = event.partition
        self.pipeline.forget()
        self.cancel_alarm()
        answered = self.answer_parked(Error.NOT_COORDINATOR) if self.answer_parked is not None else 0
        self.replaced += 1
        self.start()
        cause = error.__cause__ if error.__cause__ is not None else error
        self.log("error", "core_error", event_type=type(event).__name__, error=f"{type(cause).__name__}: {cause}",
                 detail=repr(event)[:2000], answered=answered, reloading=sorted(owned),
                 **({"not_reloaded": dropped} if dropped is not None else {}),
                 action="answered NOT_COORDINATOR, replaced the coordinator, reloading from storage",
                 traceback=traceback.format_exc()[-4000:])
        if owned and self.reload_partitions is not None:
            self.reload_partitions(owned)

    def unload_owned(self) -> None:
        """Unload every partition the coordinator owns (its parked requests are answered
        NOT_COORDINATOR)."""
        for partition in sorted(self.coordinator.owned_partitions()):
            self.dispatch(ev.UnloadPartition(now_ms=self.clock.now_ms(), partition=partition))

    # --- writes --------------------------------------------------------------------------------

    def _store(self, write: Write) -> None:
        future = self.pipeline.start(write)
        if not future.done():
            future.add_done_callback(self._write_done)
        if self.log.threshold <= 20:
            self.groups.wrote(write)

    def _write_done(self, _future: Any) -> None:
        self.drain_writes()
        self.set_alarm()

    def drain_writes(self) -> None:
        self.pipeline.drain(self._feed_outcome)

    def _feed_outcome(self, outcome: Any) -> None:
        self.handle(outcome)

    # --- timers --------------------------------------------------------------------------------

    def set_alarm(self) -> None:
        if self.closing:
            return
        if self.clock.manual:
            if self.clock.fire_due_at_once:
                self.fire_due()
            return
        self._alarm.set(self.timers.next_deadline())

    def cancel_alarm(self) -> None:
        self._alarm.cancel()

    def _on_alarm(self) -> None:
        self.fire_due()
        self.set_alarm()

    def fire_due(self) -> None:
        """Fire every timer due now, in Kafka's order, each with the write outcomes it made known."""
        now = self.clock.now_ms()
        while (due := self.timers.pop_due(now)) is not None:
            key, payload = due
            self.handle(ev.TimerFired(now_ms=now, key=key, payload=payload))
            self.drain_writes()
