"""Owns the issue's targets and Kafka's reference figures the harness marks its results against:
TARGETS (row key -> [(metric, op, threshold, label)]; a threshold given as a string names another
figure of the same row) and REFERENCES (row key -> Kafka 3.8's figure where no target is set)."""

from __future__ import annotations

from benchmarks.phases import TXN_RUNS

# key -> [(metric, op, threshold, label)]; the targets (Kafka 3.8 on a 2-core machine).
# A threshold given as a string names another figure of the same row.
TARGETS = {
    "produce.1024.p1.acks1": [("mb_s", ">=", 250, "≥ 250 MB/s"), ("cpu_s_per_gb", "<=", 3.5, "≤ 3.5 CPU-s/GB")],
    "consume.1024.p1": [("mb_s", ">=", 450, "≥ 450 MB/s"), ("cpu_s_per_gb", "<=", 1.0, "≤ 1.0 CPU-s/GB")],
    **{f"{prefix}.{size}.p{parts}.{run}": [check]
       for prefix in ("txn", "clustertxn") for size, parts in TXN_RUNS
       for run, check in (("transactional", ("ratio_to_idempotent", ">=", 0.7, "≥ 70% of idempotent")),
                          ("read_committed", ("ratio_to_uncommitted", ">=", 0.9, "≥ 90% of read_uncommitted")))},
    "e2e": [("p99_ms", "<=", 10, "p99 ≤ 10 ms")],
    "latency": [("p99_ms", "<=", 1, "p99 ≤ 1 ms")],
    "metrics.produce.on": [("ratio_to_off", ">=", 0.95, "≥ 95% of metrics off (no measurable slowdown)")],
    "metrics.requests.on": [("cpu_ratio_to_off", "<=", 1.05,
                             "broker CPU per request ≤ 105% of metrics off (no measurable slowdown)")],
    "metrics.counting": [("share_of_request", "<=", 0.02, "≤ 2% of a request's broker CPU")],
    "delayed": [("late_over_100ms", "==", 0, "every record ≤ 100 ms after its due time"), ("lost", "==", 0, "none lost")],
    "fixture.thread": [("cold_start_ms", "<=", 1000, "first start ≤ 1 s, imports included"),
                       ("p50_ms", "<=", 100, "later starts ≤ 100 ms")],
    "scaling.p100": [("ratio_to_p1", ">=", 0.8, "≥ 80% of 1 part")],
    "partitions10k": [("metadata_ms", "<=", 50, "Metadata ≤ 50 ms"), ("restart_s", "<=", 10, "restart ≤ 10 s")],
    "durability.flush1": [("mb_s", ">=", 100, "≥ 100 MB/s")],
    "connections": [("serve_ok", "==", True, "still serves")],
    "memory": [("rss_mb", "<=", 200, "RSS ≤ 200 MB"), ("peak_rss_mb", "<=", 200, "peak ≤ 200 MB")],
    # cluster: Kafka 3.8 in ZK mode, three brokers on a 2-core machine shared with the client measured
    # RF=3 acks=all 56 MB/s (1 partition) and 76 MB/s (6 partitions) at 22-26 broker CPU-s/GB (three
    # brokers summed); the issue asks for at least twice the throughput at no more than half the CPU.
    "cluster.produce.rf3.p1": [("mb_s", ">=", 112, "≥ 112 MB/s (2 x Kafka's 56)"),
                               ("cpu_s_per_gb", "<=", 11, "≤ 11 CPU-s/GB (half of Kafka's 22-26)")],
    "cluster.produce.rf3.p6": [("mb_s", ">=", 152, "≥ 152 MB/s (2 x Kafka's 76)"),
                               ("cpu_s_per_gb", "<=", 11, "≤ 11 CPU-s/GB (half of Kafka's 22-26)")],
    # sustained (issue 26): Kafka 3.8 with 1.5 GB per run did 73 MB/s at 19.1 CPU-s/GB (1 partition)
    # and 125 MB/s at 12.9 (6 partitions); targets: ≥ 90 % of the disk's RF 3 ceiling, ≤ half Kafka's CPU
    "cluster.produce.rf3.p1.sustained": [("ratio_to_ceiling", ">=", 0.9, "≥ 90 % of the disk's RF 3 ceiling"),
                                         ("cpu_s_per_gb", "<=", 9.55, "≤ 9.55 CPU-s/GB (half of Kafka's 19.1)")],
    "cluster.produce.rf3.p6.sustained": [("ratio_to_ceiling", ">=", 0.9, "≥ 90 % of the disk's RF 3 ceiling"),
                                         ("cpu_s_per_gb", "<=", 6.45, "≤ 6.45 CPU-s/GB (half of Kafka's 12.9)")],
    "cluster.memory": [("rss_mb", "<", 300, "3 brokers < 300 MB (Kafka 1.27 GB)")],
    "cluster.failover": [("failover_s", "<=", "failover_target_s", "≤ session timeout + 1 s")],
    "cluster.shutdown": [("max_gap_s", "<=", 1.0, "longest ack gap ≤ 1 s")],
    "cluster3k.controller": [("served_s", "<=", 10, "elected and served ≤ 10 s")],
    "cluster3k.restart": [("served_s", "<=", 20, "serving ≤ 20 s")],
    # scale (issue 26): Kafka 3.8's three brokers idle at 14 % of a core with 3,000 partitions RF 3
    # the default librdkafka consumer, 1,000,000 x 1 KiB on one partition: Kafka 3.8 723 MB/s
    "consume-default.1024.p1.default": [("mb_s", ">=", 723, "≥ Kafka 3.8's 723 MB/s")],
    "scale.3000.idle": [("idle_cpu_pct", "<=", 14, "idle ≤ Kafka 3.8's 14 % of a core")],
    "scale.10000.idle": [("idle_cpu_pct", "<=", 25, "idle ≤ 25 % of a core"),
                         ("rss_mb", "<=", 600, "three brokers ≤ 600 MB")],
    "scale.3000.produce": [("p99_ms", "<=", 50, "ack p99 ≤ 50 ms")],
    "scale.10000.controller": [("served_s", "<=", 15, "all leaders served ≤ 15 s")],
    "scale.10000.restart": [("served_s", "<=", 30, "full restart served ≤ 30 s")],
    # security: Kafka 3.8 with confluent-kafka, 1,000,000 x 1 KiB on one partition, over TLS: produce
    # 307 MB/s at 3.4 broker CPU-s/GB, consume 505 MB/s at 1.9 (plaintext: 467 MB/s at 2.4, 723 at 1.4)
    **{f"security.{workload}.{name}": [
        ("mb_s", ">=", mb_s, f"≥ {mb_s} MB/s (Kafka 3.8 over TLS)"),
        ("cpu_ratio_to_plaintext", "<=", 1.5, f"CPU-s/GB ≤ 1.5 x plaintext's (Kafka: {kafka_ratio})")]
       for workload, mb_s, kafka_ratio in (("produce", 307, "3.4/2.4 = 1.4"), ("consume", 505, "1.9/1.4 = 1.4"))
       for name in ("ssl", "sasl_ssl")},
    "security.auth.sasl_plaintext": [("auths_per_core_s", ">=", 500, "≥ 500 SCRAM logins/s per broker core")],
    "security.requests.sasl_plaintext": [("cpu_ratio_to_plaintext", "<=", 1.05,
                                          "broker CPU per request ≤ 105% of plaintext")],
    # quotas: a 5 MB/s quota holds a greedy producer and a greedy consumer within ±10 % over 30 s
    # while an unthrottled client on the same broker keeps its throughput
    **{f"quotas.{window}.{kind}.throttled": [("ratio_to_quota", ">=", 0.9, "≥ 90% of the 5 MB/s quota over 30 s"),
                                              ("ratio_to_quota", "<=", 1.1, "≤ 110%")]
       for window in ("default", "w3") for kind in ("produce", "consume")},
    **{f"quotas.{window}.{kind}.unthrottled": [("ratio_to_alone", ">=", 0.9, "≥ 90% of its MB/s alone")]
       for window in ("default", "w3") for kind in ("produce", "consume")},
    # acl: the AclAuthorizer with 10,000 ACLs next to no authorizer, broker CPU per request within 5 %
    **{f"acl.{workload}.on": [("cpu_ratio_to_authorizer_off", "<=", 1.05,
                               "broker CPU per request ≤ 105% of authorizer off")] for workload in ("produce", "fetch")},
    # groups: KIP-848's consumer protocol rebalances without stopping the partitions that stay, and a
    # 1,000-member group's heartbeats cost the coordinator little
    "groups.join.consumer": [("owned_s", "<=", "owned_target_s", "join-to-owned ≤ 1 heartbeat interval + 0.5 s"),
                             ("max_gap_s", "<=", "gap_target_s", "unmoved partitions: no gap > 2 x fetch.wait.max.ms")],
    "groups.kill.consumer": [("max_gap_s", "<=", "gap_target_s", "unmoved partitions: no gap > 2 x fetch.wait.max.ms")],
    "groups.heartbeat.steady": [("broker_us_per_heartbeat", "<=", 100, "≤ 100 µs broker CPU per heartbeat")],
    # group-commits (issue 26): 1,000 classic groups of one member committing every 5 s; memory per group stated
    "group-commits.1000": [("coordinator_cpu_pct", "<=", 10, "coordinator CPU ≤ 10 % of a core")],
    # share: KIP-932 share groups scale past the partition count, keep half a classic group's
    # throughput, and redeliver a dead consumer's records within the lock duration + 1 s
    "share.scale.share16": [("ratio_to_1", ">=", 10, "16 consumers ≥ 10 x 1 consumer on 1 partition")],
    "share.throughput.share": [("ratio_to_classic", ">=", 0.5, "≥ 50% of a classic group's records/s")],
    "share.redelivery": [("p99_ms", "<=", "target_ms", "p99 kill-to-redelivery ≤ lock duration + 1 s")],
    # schema registry: lookups by id, the serializers' hot call, on one broker core
    "schema_registry.lookup.get": [("requests_s", ">=", 5000, "≥ 5,000 req/s on one core"),
                                   ("p99_ms", "<=", 5, "p99 ≤ 5 ms")],
}
# key -> Kafka 3.8's figure for a run the issue sets no target for (shown in the target column)
REFERENCES = {
    "tiered.archive": "(about the local figure)",
    "cluster.produce.rf1.p1": "(Kafka 3.8: 158 MB/s)",
    "cluster.produce.rf3.p1.sustained": "(Kafka 3.8: 73 MB/s, 19.1 CPU-s/GB)",
    "cluster.produce.rf3.p6.sustained": "(Kafka 3.8: 125 MB/s, 12.9 CPU-s/GB)",
    "cluster.consume.rf3.p1": "(Kafka 3.8: 298 MB/s)",
    "cluster.consume.rf3.p6": "(Kafka 3.8: 298 MB/s)",
    "security.produce.plaintext": "(Kafka 3.8: 467 MB/s, 2.4 CPU-s/GB)",
    "security.consume.plaintext": "(Kafka 3.8: 723 MB/s, 1.4 CPU-s/GB)",
    "security.auth.sasl_plaintext.cached": "(the broker's ceiling: clients not the limit)",
    "security.auth.sasl_ssl": "(TLS handshake included; no target)",
    **{f"groups.{event}.{label}": "(classic: for comparison)" for event in ("join", "kill")
       for label in ("range", "cooperative")},
    "groups.heartbeat.join": "(joining and reconciling; no target)",
    "groups.heartbeat.steady_owned": "(owned partitions in every heartbeat; no target)",
    "share.scale.share1": "(the base of the 16-consumer ratio)",
    "share.scale.share4": "(no target)",
    "share.scale.classic1": "(classic: for comparison)",
    "share.scale.classic4": "(classic: 1 partition, 1 member works)",
    "share.throughput.classic": "(the base of the share ratio)",
    "schema_registry.lookup.get1": "(one connection: the latency floor; no target)",
    "schema_registry.lookup.get4": "(no target; see 8 connections)",
    "schema_registry.lookup.post": "(what a serializer without a cache sends; no target)",
    "schema_registry.register.sequential": "(total time and p50/p99 asked; no figure set)",
    "schema_registry.register.concurrent": "(total time and p50/p99 asked; no figure set)",
    "schema_registry.memory": "(RSS and restart asked; no figure set)",
}
