"""Broker settings the coordinator reads, by Kafka's names and with Kafka's defaults."""

from __future__ import annotations

from typing import Any, Mapping

import attrs

# The time a freshly added member has to complete its first join before it is expired.
# A constant in Kafka (CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS), not a setting.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class ConfigError(ValueError):
    """A setting is unknown or its value is out of range; the message names the setting."""


@attrs.frozen
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2_147_483_647
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    offsets_commit_timeout_ms: int = 5000
    node_id: int = 0
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    # KIP-848's consumer groups (GroupCoordinatorConfig's group.consumer.*)
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2_147_483_647
    group_consumer_migration_policy: str = "bidirectional"  # disabled, upgrade, downgrade, bidirectional

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any] | None = None, base: "CoordinatorConfig | None" = None) -> "CoordinatorConfig":
        """Build from Kafka setting names (``group.max.size``...); unknown names and bad values
        raise ConfigError naming the setting. ``base`` supplies values not given."""
        values = attrs.asdict(base) if base is not None else {}
        for name, value in (settings or {}).items():
            field = KAFKA_NAMES.get(name)
            if field is None:
                raise ConfigError(f"unknown setting {name!r}; known: {', '.join(sorted(KAFKA_NAMES))}")
            values[field] = _coerce(name, value, attrs.fields_dict(cls)[field].type)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        for name, field in KAFKA_NAMES.items():
            value = getattr(self, field)
            low = _MINIMUM.get(name)
            if low is not None and value < low:
                raise ConfigError(f"{name} must be at least {low}, got {value}")
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ConfigError(
                "group.max.session.timeout.ms must be at least group.min.session.timeout.ms, got "
                f"{self.group_max_session_timeout_ms} < {self.group_min_session_timeout_ms}")
        if self.group_consumer_migration_policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
            raise ConfigError("group.consumer.migration.policy must be one of disabled, upgrade, downgrade, "
                              f"bidirectional, got {self.group_consumer_migration_policy!r}")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms, got "
                f"{self.group_consumer_heartbeat_interval_ms} >= {self.group_consumer_session_timeout_ms}")

    def to_kafka(self) -> dict[str, Any]:
        return {name: getattr(self, field) for name, field in KAFKA_NAMES.items()}


KAFKA_NAMES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "node.id": "node_id",
    "advertised.host": "advertised_host",
    "advertised.port": "advertised_port",
    "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "group.consumer.max.size": "group_consumer_max_size",
    "group.consumer.migration.policy": "group_consumer_migration_policy",
}

# Kafka's ranges (atLeast(1) in GroupCoordinatorConfig), plus non-negative timeouts.
_MINIMUM = {
    "group.min.session.timeout.ms": 0,
    "group.initial.rebalance.delay.ms": 0,
    "group.max.size": 1,
    "offsets.retention.minutes": 1,
    "offsets.retention.check.interval.ms": 1,
    "offset.metadata.max.bytes": 0,
    "offsets.topic.num.partitions": 1,
    "offsets.commit.timeout.ms": 1,
    "node.id": 0,
    "advertised.port": 0,
    "group.consumer.session.timeout.ms": 1,
    "group.consumer.heartbeat.interval.ms": 1,
    "group.consumer.max.size": 1,
}


def _coerce(name: str, value: Any, kind: Any) -> Any:
    if kind in (str, "str"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{name} must be an integer, got {value!r}")
