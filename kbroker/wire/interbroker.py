"""The ZooKeeper-mode inter-broker APIs kbroker serves and sends, and the one version of each.

The controller pushes LeaderAndIsr, StopReplica and UpdateMetadata to the other brokers; a broker
sends ControlledShutdown to the controller. kio (Kafka 4 schemas) lacks them, so their bodies are
encoded by `schema_codec` from Kafka 3.9's JSON definitions in `schemas/`; `protocol` routes these
keys there, and callers use `protocol`'s functions for them as for any other API. The versions are
Kafka 3.9's newest, all flexible (request header v2, response header v1).

`SCHEMA_APIS` adds the client APIs encoded the same way: DescribeTransactions, because kio refuses
to decode the -1 start time Kafka answers for an id with no open transaction.

`OLD_VERSIONS` are the versions of client APIs that Kafka 3.9 serves and Kafka 4 removed (KIP-896),
so kio lacks them: their bodies go through the same codec, from Kafka 3.9's JSON definitions, with
kio's field names (`schema_codec.to_snake_case`), so a handler reads them as it reads kio's.
"""

from __future__ import annotations

from typing import NamedTuple

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
DESCRIBE_TRANSACTIONS = 65


class InterBrokerApi(NamedTuple):
    api_key: int
    name: str  # kio's style, as `protocol.api_name` gives it
    message: str  # the JSON definitions are `<message>Request.json` and `<message>Response.json`
    version: int  # the one version served and sent


APIS: dict[int, InterBrokerApi] = {
    LEADER_AND_ISR: InterBrokerApi(LEADER_AND_ISR, "leader_and_isr", "LeaderAndIsr", 7),
    STOP_REPLICA: InterBrokerApi(STOP_REPLICA, "stop_replica", "StopReplica", 4),
    UPDATE_METADATA: InterBrokerApi(UPDATE_METADATA, "update_metadata", "UpdateMetadata", 8),
    CONTROLLED_SHUTDOWN: InterBrokerApi(CONTROLLED_SHUTDOWN, "controlled_shutdown", "ControlledShutdown", 3),
}

SCHEMA_APIS: dict[int, InterBrokerApi] = {
    **APIS,
    DESCRIBE_TRANSACTIONS: InterBrokerApi(DESCRIBE_TRANSACTIONS, "describe_transactions", "DescribeTransactions", 0),
}



class OldVersions(NamedTuple):
    message: str  # `<message>Request.json` / `<message>Response.json` in schemas/, Kafka 3.9's
    versions: range  # the versions below kio's that go through schema_codec


OLD_VERSIONS: dict[int, OldVersions] = {
    1: OldVersions("Fetch", range(0, 4)),
    2: OldVersions("ListOffsets", range(0, 1)),
    8: OldVersions("OffsetCommit", range(0, 2)),
    9: OldVersions("OffsetFetch", range(0, 1)),
    19: OldVersions("CreateTopics", range(0, 2)),
    20: OldVersions("DeleteTopics", range(0, 1)),
    23: OldVersions("OffsetForLeaderEpoch", range(0, 2)),
    29: OldVersions("DescribeAcls", range(0, 1)),
    30: OldVersions("CreateAcls", range(0, 1)),
    31: OldVersions("DeleteAcls", range(0, 1)),
    32: OldVersions("DescribeConfigs", range(0, 1)),
    34: OldVersions("AlterReplicaLogDirs", range(0, 1)),
    35: OldVersions("DescribeLogDirs", range(0, 1)),
}


def old_version(api_key: int, version: int) -> str | None:
    """The message name when (api_key, version) is one of `OLD_VERSIONS`, else None."""
    old = OLD_VERSIONS.get(api_key)
    return old.message if old is not None and version in old.versions else None


def version(api_key: int) -> int:
    """The version of an inter-broker API that kbroker serves and sends."""
    return APIS[api_key].version
