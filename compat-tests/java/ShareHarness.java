// Driver for the Java share consumer (KIP-932, KafkaShareConsumer), which exists only in
// kafka-clients 4.x: compiled at test time against the 4.3.0 jars only (compat-tests/conftest.py:
// java_share_harness_43), apart from KbrokerHarness.java, which must also compile against 3.9.0.
// The `java43` adapter of compat-tests/sharekit.py (test_share_groups_families.py), which speaks the
// same lines as sharekit's confluent-kafka share member. Output: one JSON line per event on stdout
// (no JSON library on the classpath); a failure is {"event":"error",...} and exit status 1.
//
//   share-consumer <bootstrap> <group> <topic> <implicit|explicit> [accept|by-value|hold]
//       subscribe, print {"event":"ready"}, then poll (100 ms) until SIGTERM, printing
//       {"event":"record","partition":p,"offset":o,"value":"...","delivery_count":n,"t":seconds} per record.
//       explicit: acknowledge each record per the policy, then commitSync() once per poll
//         accept (default)  ACCEPT every record
//         by-value          by the record's value: "release..." RELEASE the first time this process
//                           sees it, ACCEPT after; "again..." RELEASE every time; "reject..." REJECT;
//                           "slow..." RENEW for RENEW_FOR_MS from its first delivery (the 4.x consumer
//                           hands a renewed record back on the next poll), then ACCEPT; anything else ACCEPT
//         hold              never acknowledge: poll until records come, then keep them (no further
//                           poll: in explicit mode the consumer refuses to poll with unacknowledged
//                           records) until the process ends
//       a failed acknowledgement: {"event":"ack-error","topic":t,"partition":p,"error":"<class>: <message>"}
//       (from commitSync's result, or with "offsets":[...] from the acknowledgement commit callback)
//       SIGTERM: wakeup(), close() (its implicit acknowledgements are sent then), {"event":"closed"}, exit 0.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareHarness {
    private static volatile boolean failing = false;

    public static void main(String[] args) {
        try {
            switch (args[0]) {
                case "share-consumer":
                    shareConsumer(args[1], args[2], args[3], args[4], args.length > 5 ? args[5] : "accept");
                    return;  // its shutdown hook ends the JVM
                default: throw new IllegalArgumentException("unknown subcommand " + args[0]);
            }
        } catch (Throwable t) {
            failing = true;
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            emit("{\"event\":\"error\",\"error\":" + jsonString(root.getClass().getName()) + ",\"message\":"
                    + jsonString(String.valueOf(root.getMessage())) + "}");
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void emit(String json) {
        HarnessOut.emit(json);
    }

    static String jsonString(String s) {
        return HarnessOut.jsonString(s);
    }

    static final long RENEW_FOR_MS = 6000;  // "slow..." records: RENEWed this long, then ACCEPTed

    static void shareConsumer(String bootstrap, String group, String topic, String mode, String policy) {
        if (!mode.equals("implicit") && !mode.equals("explicit"))
            throw new IllegalArgumentException("mode must be implicit or explicit, got " + mode);
        if (!Set.of("accept", "by-value", "hold").contains(policy))
            throw new IllegalArgumentException("unknown policy " + policy);
        boolean explicit = mode.equals("explicit");
        Properties p = new Properties();  // only these: KafkaShareConsumer refuses several consumer configs
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", mode);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("fetch.max.wait.ms", "100");
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicBoolean closed = new AtomicBoolean(false);
        Thread mainThread = Thread.currentThread();
        HarnessShutdown.onSigterm("share-consumer-shutdown", () -> failing, () -> {
            stop.set(true);
            consumer.wakeup();
        }, mainThread, closed);

        // every acknowledgement the broker refused, whichever way it was sent (piggybacked on ShareFetch,
        // ShareAcknowledge from commitSync, or on close)
        consumer.setAcknowledgementCommitCallback((offsets, exc) -> {
            if (exc == null) return;
            offsets.forEach((tip, offs) -> emit("{\"event\":\"ack-error\",\"topic\":" + jsonString(tip.topic())
                    + ",\"partition\":" + tip.partition() + ",\"offsets\":" + new java.util.TreeSet<>(offs)
                    + ",\"error\":" + jsonString(exc.getClass().getName() + ": " + exc.getMessage()) + "}"));
        });
        consumer.subscribe(Collections.singletonList(topic));
        emit("{\"event\":\"ready\"}");
        Set<String> seen = new HashSet<>();  // "partition:offset" of every record this process got
        Map<String, Long> firstSeen = new java.util.HashMap<>();  // when a "slow..." record first came
        boolean holding = false;
        try {
            while (!stop.get()) {
                if (holding) {  // hold: keep the records, poll no more
                    Thread.sleep(50);
                    continue;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("{\"event\":\"record\",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"value\":" + jsonString(r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8))
                            + ",\"delivery_count\":" + r.deliveryCount().map(Short::intValue).orElse(-1)
                            + ",\"t\":" + (System.currentTimeMillis() / 1000.0) + "}");
                    boolean first = seen.add(r.partition() + ":" + r.offset());
                    if (!explicit || policy.equals("hold")) continue;
                    String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (policy.equals("by-value") && value.startsWith("reject")) type = AcknowledgeType.REJECT;
                    if (policy.equals("by-value") && (value.startsWith("again") || value.startsWith("release") && first))
                        type = AcknowledgeType.RELEASE;
                    if (policy.equals("by-value") && value.startsWith("slow")) {  // keep it locked a while
                        long since = firstSeen.computeIfAbsent(r.partition() + ":" + r.offset(), k -> System.currentTimeMillis());
                        if (System.currentTimeMillis() - since < RENEW_FOR_MS) type = AcknowledgeType.RENEW;
                    }
                    consumer.acknowledge(r, type);
                }
                if (records.isEmpty() || !explicit) continue;
                if (policy.equals("hold")) {
                    holding = true;
                    continue;
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                results.forEach((tip, exc) -> exc.ifPresent(e -> emit("{\"event\":\"ack-error\",\"topic\":"
                        + jsonString(tip.topic()) + ",\"partition\":" + tip.partition() + ",\"error\":"
                        + jsonString(e.getClass().getName() + ": " + e.getMessage()) + "}")));
            }
        } catch (WakeupException | InterruptedException e) {
            // SIGTERM: close below
        }
        consumer.close(Duration.ofSeconds(30));  // sends what implicit acknowledgement still owes, leaves the group
        emit("{\"event\":\"closed\"}");
        closed.set(true);
    }
}
