"""A server's Kafka settings, by Kafka's names, turned into what it is built from: the
coordinator's ``CoordinatorConfig``, the ``TopicCatalog`` and the broker's own limits. One
reading for ``groupcoord serve`` (flags and properties files) and the test fixtures
(``groupcoord.testing``); a bad name or value raises ``ConfigError`` naming it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.adapters.wire.options import DEFAULT_MAX_REQUEST_BYTES, DataSettings
from groupcoord.core.config import KAFKA_NAMES, ConfigError, CoordinatorConfig

# The broker's settings beside the coordinator's, with Kafka's defaults.
BROKER_DEFAULTS = {
    "auto.create.topics.enable": True,
    "num.partitions": 1,
    "socket.request.max.bytes": DEFAULT_MAX_REQUEST_BYTES,
    # the partition log (wire/data_plane.py)
    "log.retention.ms": DataSettings().retention_ms,
    "log.retention.check.interval.ms": DataSettings().retention_check_interval_ms,
    "message.max.bytes": DataSettings().max_message_bytes,
}
KNOWN_NAMES = tuple(sorted(KAFKA_NAMES)) + tuple(sorted(BROKER_DEFAULTS))


@attrs.frozen
class BrokerSettings:
    config: CoordinatorConfig
    catalog: TopicCatalog
    max_request_bytes: int
    data: DataSettings = DataSettings()


def _boolean(name: str, value: Any) -> bool:
    # Kafka's ConfigDef reads a boolean as "true" or "false", any case.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _at_least_one(name: str, value: Any) -> int:
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            pass
    if number is None or number < 1:
        raise ConfigError(f"{name} must be an integer of at least 1, got {value!r}")
    return number


def _integer(name: str, value: Any, minimum: int) -> int:
    try:
        number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip())
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConfigError(f"{name} must be an integer of at least {minimum}, got {value!r}")
    return number


def topic_specs(topics: Mapping[str, int] | Iterable[str] | None) -> list[str]:
    """``NAME=PARTITIONS`` strings from a mapping (name -> partition count) or from strings."""
    if topics is None:
        return []
    if isinstance(topics, Mapping):
        return [f"{name}={count}" for name, count in topics.items()]
    return list(topics)


def read_settings(settings: Mapping[str, Any], topics: Mapping[str, int] | Iterable[str] | None = None) -> BrokerSettings:
    """``settings`` by Kafka's names (strings as in a properties file, or Python values);
    ``topics`` the catalog's. Unknown names and bad values raise ``ConfigError``."""
    unknown = sorted(name for name in settings if name not in KNOWN_NAMES)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r}; known: {', '.join(KNOWN_NAMES)}")
    broker = {name: settings.get(name, default) for name, default in BROKER_DEFAULTS.items()}
    config = CoordinatorConfig.from_kafka({k: v for k, v in settings.items() if k in KAFKA_NAMES})
    partitions = _at_least_one("num.partitions", broker["num.partitions"])
    try:
        catalog = TopicCatalog.parse(topic_specs(topics))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if _boolean("auto.create.topics.enable", broker["auto.create.topics.enable"]):
        catalog = attrs.evolve(catalog, auto_create_partitions=partitions)
    retention = _integer("log.retention.ms", broker["log.retention.ms"], -1)
    data = DataSettings(retention_ms=retention,
                        retention_check_interval_ms=_at_least_one("log.retention.check.interval.ms",
                                                                  broker["log.retention.check.interval.ms"]),
                        max_message_bytes=_at_least_one("message.max.bytes", broker["message.max.bytes"]),
                        num_partitions=partitions)
    return BrokerSettings(config, catalog, _at_least_one("socket.request.max.bytes", broker["socket.request.max.bytes"]),
                          data)
