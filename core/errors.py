"""Kafka error codes used by the group coordinator, and Kafka's error translations.

Numbers are Kafka's (``org.apache.kafka.common.protocol.Errors``); names are Kafka's too, so
scenario files and logs can say ``NOT_COORDINATOR`` instead of ``16``.
"""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128

    @classmethod
    def parse(cls, value: "str | int | Error") -> "Error":
        """An error from its Kafka name or number; ValueError names what was given."""
        if isinstance(value, Error):
            return value
        if isinstance(value, bool):
            raise ValueError(f"not a Kafka error: {value!r}")
        if isinstance(value, int):
            return cls(value)
        if isinstance(value, str) and value in cls.__members__:
            return cls[value]
        raise ValueError(f"not a Kafka error: {value!r}")


# Kafka's translation of a failed storage append (CoordinatorOperationExceptionHelper, and
# appendGroupMetadataErrorToResponseError for group-metadata writes): what the client sees.
_APPEND_ERROR_TRANSLATION = {
    Error.UNKNOWN_TOPIC_OR_PARTITION: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_ENOUGH_REPLICAS: Error.COORDINATOR_NOT_AVAILABLE,
    Error.REQUEST_TIMED_OUT: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_LEADER_OR_FOLLOWER: Error.NOT_COORDINATOR,
    Error.KAFKA_STORAGE_ERROR: Error.NOT_COORDINATOR,
    Error.MESSAGE_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.RECORD_LIST_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.INVALID_FETCH_SIZE: Error.UNKNOWN_SERVER_ERROR,
}


def translate_append_error(error: Error) -> Error:
    """The error a client gets when the storage write its response waits on failed."""
    return _APPEND_ERROR_TRANSLATION.get(error, error)


def translate_operation_error(error: Error) -> Error:
    """Like translate_append_error, plus NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS
    (Kafka's generic operation handler; clients retry it without a coordinator lookup)."""
    if error is Error.NETWORK_EXCEPTION:
        return Error.COORDINATOR_LOAD_IN_PROGRESS
    return _APPEND_ERROR_TRANSLATION.get(error, error)
