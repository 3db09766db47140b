"""The producers' default partitioners for keyed records, as pure functions: where a partition
decrease sends the records of a retired partition (docs/cluster.md, "Decreasing partitions").

- `murmur2`: Kafka's `BuiltInPartitioner.partitionForKey` (Java clients, kafka-python, aiokafka):
  `toPositive(murmur2(key)) % count`.
- `consistent_random`: librdkafka's default (confluent-kafka, kcat): `crc32(key) % count`.

A record without a key keeps `source % count` (there is no key order to keep).
"""

from __future__ import annotations

import zlib

PARTITIONERS = ("murmur2", "consistent_random")


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (32-bit, the signed int Java computes)."""
    m, seed = 0x5BD1E995, 0x9747B28C
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4:i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest, tail = length % 4, length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def target_partition(key: bytes | None, source: int, count: int, partitioner: str = "murmur2") -> int:
    """Where a record of retired partition `source` goes among `count` partitions."""
    if key is None:
        return source % count
    if partitioner == "consistent_random":
        return zlib.crc32(key) % count
    return (murmur2(key) & 0x7FFFFFFF) % count
