"""The ZooKeeper-mode inter-broker APIs kbroker serves and sends, and the one version of each.

The controller pushes LeaderAndIsr, StopReplica and UpdateMetadata to the other brokers; a broker
sends ControlledShutdown to the controller. kio (Kafka 4 schemas) lacks them, so their bodies are
encoded by `schema_codec` from Kafka 3.9's JSON definitions in `schemas/`; `protocol` routes these
keys there, and callers use `protocol`'s functions for them as for any other API. The versions are
Kafka 3.9's newest, all flexible (request header v2, response header v1).

`SCHEMA_APIS` adds the client APIs encoded the same way: DescribeTransactions, because kio refuses
to decode the -1 start time Kafka answers for an id with no open transaction.
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


def version(api_key: int) -> int:
    """The version of an inter-broker API that kbroker serves and sends."""
    return APIS[api_key].version
