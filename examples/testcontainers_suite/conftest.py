"""A suite written for testcontainers' Kafka module. The one line that differs from the Docker
version is the import below: swap it back and the same tests run against a Kafka container."""

import pytest

from kbroker.testing import KafkaContainer  # was: from testcontainers.kafka import KafkaContainer


@pytest.fixture(scope="session")
def kafka():
    with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_kraft() \
            .with_env("KAFKA_NUM_PARTITIONS", "3") as container:
        yield container


@pytest.fixture
def bootstrap(kafka):
    return kafka.get_bootstrap_server()
