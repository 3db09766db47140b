"""Kafka error codes as exceptions: every layer raises these, the API layer turns them into codes.

`ErrorCode` is kio's enum of Kafka's codes (names may change, codes never do). An exception maps to
its code through `error_code_of`, which walks the class hierarchy; anything unknown is
UNKNOWN_SERVER_ERROR, as in Kafka's `Errors.forException`.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "StartupError", "error_code_of"]


class KafkaError(Exception):
    """Base class: `code` is the Kafka error code the client receives."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code


class StartupError(Exception):
    """The broker cannot start as configured (a log dir locked by another broker or unusable, a
    listener that cannot bind): `kbroker serve` prints the message as one line and exits with 2."""


def _error(name: str, code: ErrorCode, base: type[KafkaError] = KafkaError) -> type[KafkaError]:
    return type(name, (base,), {"code": code, "__doc__": f"Kafka error {code.name} ({int(code)})."})


OffsetOutOfRangeError = _error("OffsetOutOfRangeError", ErrorCode.offset_out_of_range)
CorruptRecordError = _error("CorruptRecordError", ErrorCode.corrupt_message)
UnknownTopicOrPartitionError = _error("UnknownTopicOrPartitionError", ErrorCode.unknown_topic_or_partition)
NotLeaderOrFollowerError = _error("NotLeaderOrFollowerError", ErrorCode.not_leader_or_follower)
RequestTimedOutError = _error("RequestTimedOutError", ErrorCode.request_timed_out)
MessageTooLargeError = _error("MessageTooLargeError", ErrorCode.message_too_large)
RecordListTooLargeError = _error("RecordListTooLargeError", ErrorCode.record_list_too_large)
NotEnoughReplicasError = _error("NotEnoughReplicasError", ErrorCode.not_enough_replicas)
InvalidTopicError = _error("InvalidTopicError", ErrorCode.invalid_topic_exception)
InvalidRequiredAcksError = _error("InvalidRequiredAcksError", ErrorCode.invalid_required_acks)
InvalidTimestampError = _error("InvalidTimestampError", ErrorCode.invalid_timestamp)
UnsupportedVersionError = _error("UnsupportedVersionError", ErrorCode.unsupported_version)
TopicAlreadyExistsError = _error("TopicAlreadyExistsError", ErrorCode.topic_already_exists)
InvalidPartitionsError = _error("InvalidPartitionsError", ErrorCode.invalid_partitions)
InvalidReplicationFactorError = _error("InvalidReplicationFactorError", ErrorCode.invalid_replication_factor)
InvalidReplicaAssignmentError = _error("InvalidReplicaAssignmentError", ErrorCode.invalid_replica_assignment)
InvalidConfigError = _error("InvalidConfigError", ErrorCode.invalid_config)
InvalidRequestError = _error("InvalidRequestError", ErrorCode.invalid_request)
UnsupportedForMessageFormatError = _error(
    "UnsupportedForMessageFormatError", ErrorCode.unsupported_for_message_format
)
PolicyViolationError = _error("PolicyViolationError", ErrorCode.policy_violation)
OutOfOrderSequenceError = _error("OutOfOrderSequenceError", ErrorCode.out_of_order_sequence_number)
DuplicateSequenceError = _error("DuplicateSequenceError", ErrorCode.duplicate_sequence_number)
InvalidProducerEpochError = _error("InvalidProducerEpochError", ErrorCode.invalid_producer_epoch)
ProducerFencedError = _error("ProducerFencedError", ErrorCode.producer_fenced)
UnknownProducerIdError = _error("UnknownProducerIdError", ErrorCode.unknown_producer_id)
InvalidRecordError = _error("InvalidRecordError", ErrorCode.invalid_record)
KafkaStorageError = _error("KafkaStorageError", ErrorCode.kafka_storage_error)
ClusterAuthorizationError = _error("ClusterAuthorizationError", ErrorCode.cluster_authorization_failed)
TopicAuthorizationError = _error("TopicAuthorizationError", ErrorCode.topic_authorization_failed)
GroupAuthorizationError = _error("GroupAuthorizationError", ErrorCode.group_authorization_failed)
TransactionalIdAuthorizationError = _error("TransactionalIdAuthorizationError",
                                           ErrorCode.transactional_id_authorization_failed)
UnknownTopicIdError = _error("UnknownTopicIdError", ErrorCode.unknown_topic_id)
InvalidTxnStateError = _error("InvalidTxnStateError", ErrorCode.invalid_txn_state)
TransactionCoordinatorFencedError = _error(
    "TransactionCoordinatorFencedError", ErrorCode.transaction_coordinator_fenced
)
CoordinatorNotAvailableError = _error("CoordinatorNotAvailableError", ErrorCode.coordinator_not_available)
FencedLeaderEpochError = _error("FencedLeaderEpochError", ErrorCode.fenced_leader_epoch)
UnknownLeaderEpochError = _error("UnknownLeaderEpochError", ErrorCode.unknown_leader_epoch)
StaleControllerEpochError = _error("StaleControllerEpochError", ErrorCode.stale_controller_epoch)
StaleBrokerEpochError = _error("StaleBrokerEpochError", ErrorCode.stale_broker_epoch)
NotControllerError = _error("NotControllerError", ErrorCode.not_controller)
LeaderNotAvailableError = _error("LeaderNotAvailableError", ErrorCode.leader_not_available)
OffsetMovedToTieredStorageError = _error("OffsetMovedToTieredStorageError", ErrorCode.offset_moved_to_tiered_storage)
ResourceNotFoundError = _error("ResourceNotFoundError", ErrorCode.resource_not_found)


def error_code_of(exc: BaseException) -> ErrorCode:
    """The Kafka error code for an exception; UNKNOWN_SERVER_ERROR for anything that is not a KafkaError."""
    if isinstance(exc, KafkaError):
        return exc.code
    return ErrorCode.unknown_server_error
