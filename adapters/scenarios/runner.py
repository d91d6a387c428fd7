"""Runs scenario files (spec/conformance/FORMAT.md, version 1) against the core.

Each scenario drives a fresh ``Driver``: requests become events through ``core.wire``, answers
are shaped to the request's API version and matched as the format says. Anything the format
does not define is a FAIL with the reason, never a skip.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol.translate import request_event, response_fields
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.scenarios.records import kafka_record
from groupcoord.core import events as ev
from groupcoord.core.config import ConfigError, CoordinatorConfig
from groupcoord.core.errors import Error

# The format's defaults are Kafka's; "one offsets partition holds them all".
SCENARIO_BASE_CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)
_MATCHER_KEYS = {"bind", "prefix", "one_of", "not", "any"}


class ScenarioFailure(Exception):
    pass


@attrs.frozen
class Result:
    path: str
    name: str
    passed: bool
    step: int | None = None
    reason: str = ""
    crashed: bool = False  # the coordinator or the runner raised (not a mismatch the step found)

    def line(self) -> str:
        if self.passed:
            return f"PASS {self.path}"
        where = f" step {self.step}" if self.step is not None else ""
        return f"FAIL {self.path}{where}: {self.reason}"


def scenario_files(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        else:
            files.append(p)
    return files


def read_scenario(path: str | Path) -> tuple[Any, Result | None]:
    """The scenario in ``path``, or a failed Result saying why it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")), None
    except (OSError, ValueError) as e:
        return None, Result(str(path), "", False, None, f"cannot read scenario: {e}")


def run_file(path: str | Path, observer: Callable | None = None) -> Result:
    scenario, unreadable = read_scenario(path)
    return unreadable or run_scenario(scenario, str(path), observer)


def run_file_recorded(path: str | Path, directory: str | Path) -> tuple[Result, str | None]:
    """``run_file``, writing what the scenario's coordinator did as an instance-scoped trace
    (spec/trace-format.md) in ``directory``: ``recording.jsonl`` and ``meta.json``, for
    ``groupcoord replay``. The second value says why no trace was written (None when it was)."""
    scenario, unreadable = read_scenario(path)
    if unreadable:
        return unreadable, "the scenario cannot be read"
    runner = _RecordingRunner(Path(directory))
    result = run_steps(runner, scenario, str(path))
    return result, runner.problem


def run_scenario(scenario: dict, path: str = "<scenario>", observer: Callable | None = None) -> Result:
    return run_steps(Runner(observer), scenario, path)


def run_steps(runner, scenario: dict, path: str) -> Result:
    """Checks the scenario's shape, then feeds its steps to ``runner`` (``start``, ``step``,
    optionally ``close``); the first failing step and why, or a pass."""
    name = scenario.get("name", "") if isinstance(scenario, dict) else ""
    step_no = None
    try:
        if not isinstance(scenario, dict) or not isinstance(scenario.get("steps"), list):
            raise ScenarioFailure("a scenario is an object with a list of steps")
        unknown = set(scenario) - {"name", "source", "config", "steps", "topics"}
        if unknown:
            raise ScenarioFailure(f"unknown scenario keys {sorted(unknown)}")
        runner.start(scenario.get("config") or {}, scenario.get("topics"))
        for step_no, step in enumerate(scenario["steps"], start=1):
            runner.step(step)
    except ScenarioFailure as e:
        return Result(path, name, False, step_no, str(e))
    except Exception as e:  # a crash of the coordinator or runner is a failure, with its cause
        return Result(path, name, False, step_no, f"{type(e).__name__}: {e}", crashed=True)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # a runner that cannot close must not hide the scenario's result
                pass
    return Result(path, name, True)


def scenario_config(config: dict, topics: dict | None) -> CoordinatorConfig:
    """A scenario's coordinator config, once its ``config`` and ``topics`` are checked."""
    try:
        cfg = CoordinatorConfig.from_kafka(config, base=SCENARIO_BASE_CONFIG)
    except ConfigError as e:
        raise ScenarioFailure(f"bad config: {e}") from None
    if topics is not None and not (isinstance(topics, dict) and all(
            isinstance(k, str) and isinstance(v, int) and v > 0 for k, v in topics.items())):
        raise ScenarioFailure("topics must map topic names to partition counts")
    return cfg


class Runner:
    def __init__(self, observer: Callable | None) -> None:
        self.observer = observer
        self.bindings: dict[str, Any] = {}
        self.sent: dict[str, tuple[str, int]] = {}
        self.topics: dict[str, int] | None = None
        self.image: tuple | None = None  # the last topics_image: ((name, topic id, partitions), ...)
        self.records_seen = 0  # stored records already matched by expect_records

    def start(self, config: dict, topics: dict | None) -> None:
        cfg = scenario_config(config, topics)
        self.topics = topics
        self.driver = Driver(cfg, observer=self.observer)

    def step(self, step: dict) -> None:
        if not isinstance(step, dict):
            raise ScenarioFailure(f"a step is an object, got {step!r}")
        if "send" in step:
            self._send(step)
        elif "expect" in step:
            self._check_keys(step, {"expect", "response"})
            self._expect(step["expect"], step.get("response", {}))
        elif "expect_pending" in step:
            self._check_keys(step, {"expect_pending"})
            for name in step["expect_pending"]:
                if name not in self.sent:
                    raise ScenarioFailure(f"request {name!r} was never sent")
                if name in self.driver.responses:
                    raise ScenarioFailure(f"{name} was answered, expected pending: {self._shown(name)}")
        elif "advance_ms" in step:
            self._check_keys(step, {"advance_ms"})
            ms = step["advance_ms"]
            if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
                raise ScenarioFailure(f"advance_ms must be a non-negative integer, got {ms!r}")
            self.driver.advance(ms)
        elif "expect_group" in step:
            self._check_keys(step, {"expect_group"})
            self._expect_group(step["expect_group"])
        elif "storage" in step:
            self._storage(step)
        elif "unload" in step:
            self._check_keys(step, {"unload"})
            self.driver.unload()
        elif "reload" in step:
            self._check_keys(step, {"reload", "config"})
            config = None
            if "config" in step:
                try:
                    config = CoordinatorConfig.from_kafka(step["config"], base=self.driver.config)
                except ConfigError as e:
                    raise ScenarioFailure(f"bad config: {e}") from None
            self.driver.reload(config)
            self._after_reload()
        elif "topics_image" in step:
            self._check_keys(step, {"topics_image"})
            self.image = read_image(step["topics_image"])
            self._feed_image(self.image)
        elif "expect_records" in step:
            self._check_keys(step, {"expect_records"})
            self._expect_records(step["expect_records"])
        else:
            raise ScenarioFailure(f"unknown step {sorted(step)}")
        self._check_answered_once()

    # --- the topics image and the records (consumer groups) --------------------------------

    def _feed_image(self, image: tuple) -> None:
        self.driver.dispatch(ev.TopicsChanged(now_ms=self.driver.now_ms, topics=image))

    def _after_reload(self) -> None:
        """A new instance sees the cluster's metadata as the old one did (it is no group state)."""
        if self.image is not None:
            self._feed_image(self.image)

    def _stored_records(self) -> tuple:
        """Every record written so far, oldest first (one offsets partition holds them all)."""
        return self.driver.storage.records(0)

    def _record_view(self, record) -> dict:
        return kafka_record(record)

    def _expect_records(self, expected) -> None:
        if not isinstance(expected, list) and not (isinstance(expected, dict) and (
                set(expected) == {"ordered"} or expected == {"any": True})):
            raise ScenarioFailure("expect_records takes a list of records, {\"ordered\": [...]} or {\"any\": true}")
        stored = self._stored_records()
        if len(stored) < self.records_seen:
            raise ScenarioFailure("the storage lost records (compacted?): expect_records cannot tell what is new")
        actual = [self._record_view(r) for r in stored[self.records_seen:]]
        self.records_seen = len(stored)
        problem = self._match(expected, actual, "records")
        if problem:
            raise ScenarioFailure(problem)

    @staticmethod
    def _check_keys(step: dict, allowed: set[str]) -> None:
        extra = set(step) - allowed
        if extra:
            raise ScenarioFailure(f"unknown keys {sorted(extra)} in step {sorted(step)}")

    # --- send ------------------------------------------------------------------------

    def _read_send(self, step: dict) -> tuple[str, str, int, dict]:
        """A ``send`` step checked: its API, name, version and request body (bindings substituted)."""
        self._check_keys(step, {"send", "as", "version", "client_id", "client_host", "request"})
        api, name = step["send"], step.get("as")
        if api not in schema.SUPPORTED_VERSIONS:
            raise ScenarioFailure(f"unknown API {api!r}")
        if not isinstance(name, str) or name in self.sent:
            raise ScenarioFailure(f"'as' must be a new name, got {name!r}")
        version = step.get("version", schema.SUPPORTED_VERSIONS[api][1])
        body = decode_bytes(api, version, self._substitute(step.get("request", {})))
        if api == "ConsumerGroupHeartbeat" and isinstance(body, dict):
            for t in body.get("topic_partitions") or ():
                if isinstance(t, dict) and "topic_id" in t:
                    if not _is_topic_id(t["topic_id"]):
                        raise ScenarioFailure(f"topic_id {t['topic_id']!r} is not a uuid string")
                    t["topic_id"] = uuid.UUID(t["topic_id"])
        return api, name, version, body

    def _send(self, step: dict) -> None:
        api, name, version, body = self._read_send(step)
        driver = self.driver
        try:
            event = request_event(
                api, version, body, request_id=name, now_ms=driver.now_ms,
                client_id=step.get("client_id", "client"), client_host=step.get("client_host", "/127.0.0.1"),
                new_member_uuid=driver.new_uuid() if api in ("JoinGroup", "ConsumerGroupHeartbeat") else "")
        except schema.SchemaError as e:
            raise ScenarioFailure(f"bad request: {e}") from None
        self.sent[name] = (api, version)
        driver.dispatch(event)

    def _substitute(self, value):
        if isinstance(value, str) and value.startswith("$"):
            key = value[1:]
            if key not in self.bindings:
                raise ScenarioFailure(f"{value} is not bound")
            return self.bindings[key]
        if isinstance(value, dict):
            return {k: self._substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._substitute(v) for v in value]
        return value

    # --- expectations ----------------------------------------------------------------

    def _shown(self, name: str) -> dict:
        api, version = self.sent[name]
        return hexed(response_fields(api, version, self.driver.responses[name]))

    def _expect(self, name: str, expected: dict) -> None:
        if name not in self.sent:
            raise ScenarioFailure(f"request {name!r} was never sent")
        if name not in self.driver.responses:
            raise ScenarioFailure(f"{name} has not been answered")
        actual = self._shown(name)
        problem = self._match(expected, actual, name)
        if problem:
            raise ScenarioFailure(f"{name}: {problem}; got {json.dumps(actual, sort_keys=True)}")

    def _expect_group(self, expected: dict) -> None:
        gid = expected.get("group_id")
        group = self.driver.coordinator.group(gid)
        if group is None:
            actual = {"group_id": gid, "state": "absent"}
        elif getattr(group, "KIND", None) == "consumer":
            actual = {"group_id": gid, "state": group.state.value, "protocol_type": "consumer",
                      "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                      "members": list(group.members)}
        else:
            actual = {
                "group_id": gid, "state": group.state.value, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader_id": group.leader_id, "members": list(group.members),
            }
        want = dict(expected)
        if want.get("state") == "Dead" and actual["state"] == "absent":
            want = {"group_id": gid, "state": "absent"}
        unknown = set(want) - {"group_id", "state", "generation_id", "protocol_type", "protocol_name",
                               "leader_id", "members", "group_epoch", "assignment_epoch"}
        if unknown:
            raise ScenarioFailure(f"unknown expect_group keys {sorted(unknown)}")
        problem = self._match(want, actual, f"group {gid}")
        if problem:
            raise ScenarioFailure(f"group {gid}: {problem}; holds {json.dumps(actual, sort_keys=True)}")

    def _match(self, expected, actual, where: str) -> str | None:
        bindings = dict(self.bindings)
        problem = _match(expected, actual, bindings, where, key=None)
        if problem is None:
            self.bindings = bindings
        return problem

    def _check_answered_once(self) -> None:
        for name, count in self.driver.answer_counts.items():
            if count > 1:
                raise ScenarioFailure(f"{name} was answered {count} times")

    # --- storage ---------------------------------------------------------------------

    def _storage(self, step: dict) -> None:
        self._check_keys(step, {"storage", "error"})
        action = step["storage"]
        try:
            error = Error.parse(step["error"]) if "error" in step else None
        except ValueError as e:
            raise ScenarioFailure(str(e)) from None
        if action == "hold":
            self.driver.hold_writes()
        elif action == "release":
            self.driver.release_writes(error)
        elif action == "fail_next":
            if error is None:
                raise ScenarioFailure("fail_next needs an error")
            self.driver.fail_next_write(error)
        else:
            raise ScenarioFailure(f"unknown storage action {action!r}")


# --- matching (FORMAT.md "expect") -------------------------------------------------------

class _RecordingRunner(Runner):
    """A runner whose Driver's every (event, commands) goes to a trace (trace_io.InstanceRecorder).
    A trace that cannot be written (or held in one file) sets ``problem``; the scenario runs on."""

    def __init__(self, directory: Path) -> None:
        super().__init__(None)
        self.directory = directory
        self.recorder = None
        self.problem: str | None = "the scenario stopped before its coordinator started"

    def start(self, config: dict, topics: dict | None) -> None:
        from groupcoord.adapters.traces.trace_files import InstanceRecorder

        try:
            self.recorder = InstanceRecorder(self.directory)
        except OSError as e:
            self.problem = f"cannot write the trace: {e}"
        else:
            self.observer = self._record
        super().start(config, topics)
        if self.recorder is not None:
            self.recorder.config = self.driver.config  # what meta.json names
            self.problem = None

    def _record(self, event, commands) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder(event, commands)
        except OSError as e:  # a full disk: the scenario's own result still counts
            self.problem = f"cannot write the trace: {e}"
            self._discard()

    def step(self, step: dict) -> None:
        if isinstance(step, dict) and step.get("reload") and step.get("config") and self.problem is None:
            try:
                changed = CoordinatorConfig.from_kafka(step["config"], base=self.driver.config) != self.driver.config
            except (ConfigError, TypeError, ValueError, AttributeError):
                changed = False  # the step itself fails with the reason
            if changed:
                # One trace has one config (its manifest's); a replay would run the new
                # instance with the old settings and report divergences that are not there.
                self.problem = "a reload changes the config, which one trace cannot hold"
        super().step(step)

    def close(self) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.close()
        except OSError as e:
            self.problem = self.problem or f"cannot write the trace: {e}"
        if self.problem is not None:
            self._discard()

    def _discard(self) -> None:
        """No partial trace is left behind (it would replay as a different run); only the
        files this runner writes are removed, and the directory if that empties it."""
        from groupcoord.adapters.traces.trace_files import MANIFEST

        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            try:
                recorder.writer.close()
            except OSError:
                pass
            for written in (recorder.writer.path, self.directory / MANIFEST):
                written.unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:
            pass


def _match(expected, actual, bindings: dict, where: str, key: str | None) -> str | None:
    if isinstance(expected, dict) and expected and set(expected) <= _MATCHER_KEYS:
        return _match_matcher(expected, actual, bindings, where, key)
    if isinstance(expected, dict) and set(expected) == {"ordered"}:
        if not isinstance(actual, list) or len(actual) != len(expected["ordered"]):
            return f"{where}: expected {len(expected['ordered'])} elements in order, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected["ordered"], actual)):
            problem = _match(e, a, bindings, f"{where}[{i}]", key)
            if problem:
                return problem
        return None
    if isinstance(expected, str) and expected.startswith("$"):
        name = expected[1:]
        if name not in bindings:
            return f"{where}: {expected} is not bound"
        expected = bindings[name]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {actual!r}"
        for k, e in expected.items():
            if k not in actual:
                if isinstance(e, dict) and e.get("any") is True:
                    continue
                return f"{where}.{k}: absent"
            problem = _match(e, actual[k], bindings, f"{where}.{k}", k)
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where}: expected {len(expected)} elements, got {actual!r}"
        return _match_unordered(expected, actual, bindings, where, key)
    if key is not None and key.endswith("error_code") and expected is not None:
        try:
            expected = int(Error.parse(expected))
        except ValueError:
            return f"{where}: {expected!r} is not a Kafka error"
    if expected != actual or type(expected) is bool and type(actual) is not bool:
        return f"{where}: expected {expected!r}, got {actual!r}"
    return None


def _match_matcher(m: dict, actual, bindings: dict, where: str, key: str | None) -> str | None:
    if m.get("any") is True:
        return None
    if "one_of" in m:
        if not any(_match(option, actual, dict(bindings), where, key) is None for option in m["one_of"]):
            return f"{where}: {actual!r} is none of {m['one_of']!r}"
    if "not" in m and _match(m["not"], actual, dict(bindings), where, key) is None:
        return f"{where}: {actual!r} must not match {m['not']!r}"
    if "prefix" in m and not (isinstance(actual, str) and actual.startswith(m["prefix"])):
        return f"{where}: {actual!r} does not start with {m['prefix']!r}"
    if "bind" in m:
        if "one_of" not in m and "not" not in m and not isinstance(actual, str):
            return f"{where}: expected a string to bind, got {actual!r}"
        name = m["bind"]
        if name in bindings and bindings[name] != actual:
            return f"{where}: {name} is already bound to {bindings[name]!r}, got {actual!r}"
        bindings[name] = actual
    return None


def _match_unordered(expected: list, actual: list, bindings: dict, where: str, key) -> str | None:
    """Each expected element matches a distinct actual one (backtracking, bindings included)."""
    used = [False] * len(actual)

    def solve(i: int, current: dict) -> dict | None:
        if i == len(expected):
            return current
        for j, a in enumerate(actual):
            if used[j]:
                continue
            trial = dict(current)
            if _match(expected[i], a, trial, f"{where}[{i}]", key) is None:
                used[j] = True
                done = solve(i + 1, trial)
                if done is not None:
                    return done
                used[j] = False
        return None

    solved = solve(0, dict(bindings))
    if solved is None:
        return f"{where}: no one-to-one match of {expected!r} in {actual!r}"
    bindings.clear()
    bindings.update(solved)
    return None


def _is_topic_id(value) -> bool:
    try:
        return isinstance(value, str) and uuid.UUID(value).int != 0
    except ValueError:
        return False


def read_image(value) -> tuple:
    """A ``topics_image`` step's topics as ``TopicsChanged.topics``, checked."""
    if not isinstance(value, list):
        raise ScenarioFailure("topics_image is a list of {name, topic_id, partitions}")
    out, names, ids = [], set(), set()
    for t in value:
        if not (isinstance(t, dict) and set(t) == {"name", "topic_id", "partitions"}
                and isinstance(t["name"], str) and t["name"] and _is_topic_id(t["topic_id"])
                and isinstance(t["partitions"], int) and not isinstance(t["partitions"], bool)
                and t["partitions"] > 0):
            raise ScenarioFailure(f"bad topics_image entry {t!r}: name, topic_id (a non-zero uuid) and "
                                  f"partitions (> 0) are needed")
        tid = str(uuid.UUID(t["topic_id"]))
        if t["name"] in names or tid in ids:
            raise ScenarioFailure(f"topics_image names {t['name']!r} or its id twice")
        names.add(t["name"])
        ids.add(tid)
        out.append((t["name"], tid, t["partitions"]))
    return tuple(sorted(out))


def rewrite_topic_ids(value, fn: Callable):
    """``value`` with every field named ``topic_id`` (at any depth) replaced by ``fn(it)``."""
    if isinstance(value, dict):
        return {k: fn(v) if k == "topic_id" else rewrite_topic_ids(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_topic_ids(v, fn) for v in value]
    return value


def hexed(value):
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: hexed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [hexed(v) for v in value]
    return value


def decode_bytes(api: str, version: int, body):
    """Hex strings in the schema's bytes fields become bytes."""
    fields = schema.SCHEMAS[api][2]  # the request fields

    def walk(obj, spec):
        if not isinstance(obj, dict):
            return obj
        out = dict(obj)
        for field in spec:
            name, typ = field[0], field[2]
            if name not in out:
                continue
            value = out[name]
            if typ == "bytes" and isinstance(value, str):
                try:
                    out[name] = bytes.fromhex(value)
                except ValueError:
                    raise ScenarioFailure(f"{name}: {value!r} is not hex") from None
            elif isinstance(typ, list) and isinstance(value, list):
                out[name] = [walk(v, typ) for v in value]
        return out

    return walk(body, fields)
