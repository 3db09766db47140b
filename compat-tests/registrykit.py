"""What the schema registry's compat tests share: a registry URL on a free port for a module's
broker (`KBROKER_OVERRIDES`), plain HTTP calls to it, and records produced and consumed through
kbroker with a confluent-kafka serializer's bytes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from conftest import free_port, wait_until


def registry_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def get(url: str, path: str):
    """The JSON answer of GET url+path; None when the registry does not answer (yet) or refuses."""
    try:
        with urllib.request.urlopen(url + path, timeout=5) as answer:
            return json.loads(answer.read())
    except (urllib.error.URLError, ConnectionError):
        return None


def wait_ready(url: str) -> None:
    wait_until(lambda: get(url, "/subjects") is not None, 30, "the registry's listener")


def http(url: str, method: str, path: str, body: bytes | None = None, content_type: str = "application/json",
         accept: str | None = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of any request, error answers included."""
    request = urllib.request.Request(url + path, data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", content_type)
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("Content-Type"), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


def produce(bootstrap: str, topic: str, serializer, values: list) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The raw values of the first `count` records of `topic` (a group of its own, from the earliest)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def poll() -> int:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
        return len(got)

    try:
        wait_until(lambda: poll() >= count, 60, f"{count} records of {topic}")
    finally:
        consumer.close()
    return got
