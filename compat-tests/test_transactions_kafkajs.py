"""KafkaJS 2.2.4 transactions on the single node: test_transactions.py's scenarios, run with KafkaJS
as one more family (its transactional producer speaks txnkit's line protocol through
`harness.js txn-producer`; its reader is `harness.js txn-read`, kafkajskit.Producers / kafkajskit.read).

1. commit, abort, commit written by KafkaJS and read by every family (KafkaJS, confluent-kafka, Java,
   aiokafka, kafka-python), and written by every other family and read by KafkaJS, at read_committed
   and read_uncommitted: exactly the committed records in order, or every record; one marker per
   transaction and partition; positions past the markers and aborted records;
2. fencing: a second KafkaJS producer with the same transactional id fences the first
   (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH as KafkaJS error types);
3. a transaction left open past transaction.timeout.ms is aborted by the broker;
4. SIGKILL of the broker in the middle of a KafkaJS transaction, restart: all or nothing;
5. offsets sent to a transaction (KafkaJS `transaction.sendOffsets`: AddOffsetsToTxn +
   TxnOffsetCommit) visible in the group only after the commit, never after an abort.
"""

from __future__ import annotations

import kafkajskit as kj
import pytest
import test_transactions as scenarios
import txnkit as tk

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def kafkajs(kt, tmp_path_factory):
    """The KafkaJS harness: node + the locked KafkaJS, or a skip (a failure under CI=true)."""
    return kj.harness(kt, tmp_path_factory.mktemp("kafkajs"))


KBROKER_OVERRIDES = dict(scenarios.KBROKER_OVERRIDES)
OTHERS = tk.FAMILIES  # confluent, java, aiokafka, kafka-python
PAIRS = [("kafkajs", reader) for reader in ("kafkajs", *OTHERS)] + [(producer, "kafkajs") for producer in OTHERS]


@pytest.fixture
def producers(kt, request, tmp_path, kafkajs):
    started = kj.Producers(kt, request, tmp_path)
    yield started
    started.close_all()
    print(started.describe())  # pytest shows a test's captured teardown output when it failed


@pytest.fixture
def reader(kt, request):
    def read(family, broker, topic, isolation, ends):
        return kj.read(kt, request, family, broker.bootstrap, topic, isolation, ends)

    return read


@pytest.fixture(scope="module")
def written():
    """producer family -> (topic, committed acks, aborted acks), or the exception its run raised."""
    return {}


@pytest.mark.parametrize("isolation", [tk.READ_COMMITTED, tk.READ_UNCOMMITTED])
@pytest.mark.parametrize("producer,consumer", PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_commit_abort_commit(kt, kbroker, producers, reader, written, producer, consumer, isolation):
    scenarios.test_commit_abort_commit(kt, kbroker, producers, reader, written, producer, consumer, isolation)


def test_second_producer_fences_the_first(kt, kbroker, producers, reader):
    scenarios.test_second_producer_fences_the_first(kt, kbroker, producers, reader, "kafkajs")


def test_open_transaction_past_its_timeout_is_aborted(kt, kbroker, producers, reader):
    scenarios.test_open_transaction_past_its_timeout_is_aborted(kt, kbroker, producers, reader, "kafkajs")


@pytest.mark.parametrize("after_restart", ["old-producer-commits", "new-producer-inits"])
def test_broker_killed_in_the_middle_of_a_transaction(kt, fresh_kbroker, producers, reader, after_restart):
    scenarios.test_broker_killed_in_the_middle_of_a_transaction(kt, fresh_kbroker, producers, reader, "kafkajs",
                                                                after_restart)


def test_offsets_sent_to_a_transaction_appear_only_after_its_commit(kt, kbroker, producers, kafkajs):
    scenarios.test_offsets_sent_to_a_transaction_appear_only_after_its_commit(kt, kbroker, producers, "kafkajs")
