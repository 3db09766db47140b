"""Tiered storage with the S3 store, against a real S3-compatible endpoint: a moto server process
(`python -m moto.server`, the test extra's moto[server]) on 127.0.0.1. Closed segments are archived
as objects and deleted locally; consumers read every record from offset 0 through ranged GETs, and
again after a broker restart (the manifest object is reloaded)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import tieredkit as tk

pytestmark = pytest.mark.timeout(180)

BUCKET = "kbroker-archive"
CREDENTIALS = {"rsm.config.s3.access.key.id": "testing", "rsm.config.s3.secret.access.key": "testing"}


@pytest.fixture(scope="module")
def s3_endpoint(kt, tmp_path_factory):
    kt.require_module("boto3")
    kt.require_module("moto.server")
    kt.require_module("flask")
    port = kt.free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
        tk.wait_for(lambda: proc.poll() is None and client.create_bucket(Bucket=BUCKET), 30, "the moto S3 server")
        yield endpoint, client
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # only the process started here, by PID
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def s3_broker(kt, tmp_path_factory, s3_endpoint):
    endpoint, _client = s3_endpoint
    broker = kt.Broker(tmp_path_factory.mktemp("kbroker-tiered-s3"), {
        **tk.BROKER_OVERRIDES, **CREDENTIALS, "remote.log.storage.manager.class.name": "s3",
        "rsm.config.s3.bucket": BUCKET, "rsm.config.s3.endpoint.url": endpoint, "rsm.config.s3.region": "us-east-1",
        "rsm.config.s3.path.style.access": "true", "rsm.config.s3.prefix": "tiered/"})
    yield from kt._running(broker)


def _archived_objects(client, topic: str) -> list[str]:
    listing = client.list_objects_v2(Bucket=BUCKET, Prefix=f"tiered/{topic}-")
    return [item["Key"] for item in listing.get("Contents", ())]


def test_history_is_read_from_s3(kt, s3_broker, s3_endpoint):
    kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    _endpoint, client = s3_endpoint
    topic = kt.topic_name("tiered", "s3")
    tk.create_topic(s3_broker.bootstrap, topic, 1)
    msgs = kt.make_messages("s3", partitions=1, per_partition=30)
    tk.produce(kt, s3_broker.bootstrap, topic, msgs)

    def archived_and_deleted() -> bool:
        logs = [k for k in _archived_objects(client, topic) if k.endswith(".log")]
        return len(logs) >= 2 and len(list((s3_broker.data_dir / f"{topic}-0").glob("*.log"))) == 1

    tk.wait_for(archived_and_deleted, 30, "segments archived to S3 and deleted locally")
    local_start = tk.local_log_start(s3_broker.data_dir, topic, 0)
    assert local_start > 0
    keys = _archived_objects(client, topic)
    assert any(k.endswith("/0/manifest.json") for k in keys) and any(k.endswith(".index") for k in keys), keys

    for family in ("confluent", "kafka-python"):
        got = tk.consume(family, kt, s3_broker.bootstrap, topic, {0: 0}, {0: len(msgs)})
        kt.assert_records_match(msgs, got)
    per_partition = kt.by_partition(msgs)
    kt.assert_list_offsets(per_partition, lambda spec: tk.offsets("kafka-python", s3_broker.bootstrap, topic, 1, spec),
                           kt.timestamp_targets(per_partition[0]))

    s3_broker.kill()
    s3_broker.start()
    started = time.monotonic()
    got = tk.consume("confluent", kt, s3_broker.bootstrap, topic, {0: 0}, {0: len(msgs)})
    kt.assert_records_match(msgs, got)
    assert time.monotonic() - started < 30
