"""The coordinator's configuration (core/config.py): settings by Kafka name, and the checks."""

from __future__ import annotations

import pytest

from groupcoord.core.config import CoordinatorConfig


def test_settings_by_kafka_name_keep_the_base_and_check_strings():
    from groupcoord.core.config import ConfigError, CoordinatorConfig

    base = CoordinatorConfig(node_id=7, group_max_size=4)
    config = CoordinatorConfig.from_kafka({"group.max.size": 9, "advertised.host": "broker-1"}, base=base)
    assert (config.node_id, config.group_max_size, config.advertised_host) == (7, 9, "broker-1")
    assert CoordinatorConfig.from_kafka(None, base=base) == base
    assert CoordinatorConfig.from_kafka({"advertised.port": " 9093 "}).advertised_port == 9093
    for bad in ("", 5, None):
        with pytest.raises(ConfigError, match=r"^advertised\.host must be a non-empty string, got "):
            CoordinatorConfig.from_kafka({"advertised.host": bad})
    with pytest.raises(ConfigError) as e:
        CoordinatorConfig.from_kafka({"group.mx.size": 3})
    assert str(e.value).startswith("unknown setting 'group.mx.size'; known: advertised.host, advertised.port, group.")


def test_the_session_timeout_bounds_may_be_equal_but_not_crossed():
    from groupcoord.core.config import ConfigError

    CoordinatorConfig(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=6000).validate()
    with pytest.raises(ConfigError) as e:
        CoordinatorConfig(group_min_session_timeout_ms=6001, group_max_session_timeout_ms=6000).validate()
    assert str(e.value) == ("group.max.session.timeout.ms must be at least group.min.session.timeout.ms, "
                            "got 6000 < 6001")
