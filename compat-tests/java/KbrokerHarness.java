// Small driver for the stock Java kafka-clients, compiled at test time against 3.9.0 and against 4.3.0
// (compat-tests/conftest.py: java_harness, java_harness_43), so it calls only what both have (the
// deprecated Admin.alterConfigs, gone from 4.x, by reflection). Used by compat-tests/test_java.py,
// test_groups_families.py, test_cluster_groups.py, test_cluster_java.py, test_cluster_java_admin.py,
// test_authorized_operations.py, test_produce_validation.py, test_log_dirs.py and (through txnkit.py)
// test_transactions.py and test_cluster_transactions.py.
//
// It makes exactly the calls Spark's Kafka connector makes: Admin describeTopics / listOffsets on
// the driver, KafkaConsumer.assign + seek + poll on executors, an idempotent KafkaProducer for
// writes. Input and output are plain lines (no JSON library on the classpath); binary fields are
// base64, a null key/value is "-", headers are "b64key:b64value" pairs joined by ","; on input ""
// means no headers, on output "~" does (output fields are space-separated).
//
//   produce <bootstrap> <topic> <compression> <acks>
//       stdin, one record a line: partition \t timestamp_ms \t key \t value \t headers
//       (partition -1: let the partitioner choose; timestamp -1: let the producer stamp it)
//       stdout: "ACK <line#> <partition> <offset> <timestamp>" per record, then "DONE <n>"
//   produce-each <bootstrap> <topic> <compression> <acks>
//       the same, but a failed record is a line "FAIL <line#> <exception class> <message>" instead of
//       ending the run (per-record produce errors, KIP-467)
//   consume <bootstrap> <topic> <n> <timeout_ms> <seek> [group.id]
//       seek: "beginning" (all partitions) or "p:off,p:off" (only those partitions)
//       stdout: "REC <partition> <offset> <timestamp> <key> <value> <headers>" then "DONE <n>"
//   group-consume <bootstrap> <topic> <group> <n> <timeout_ms>
//       a consumer-group member (compat-tests/securitykit.py): subscribe from the earliest offset,
//       poll until n records (or the timeout), commitSync, close (LeaveGroup); the same REC / DONE lines
//   admin <bootstrap> create <topic> <partitions>      -> "CREATED <topic>"
//   admin <bootstrap> describe <topic>                 -> "PARTITION <p> <leader> <replicas,>"
//   admin <bootstrap> offsets <topic> <spec>...        -> "OFFSET <spec> <p> <offset> <timestamp> <leader epoch|->"
//       spec: earliest | latest | ts:MS, each looked up for every partition of the topic
//   admin <bootstrap> delete <topic>                   -> "DELETED <topic>"
//   admin <bootstrap> list                             -> "TOPIC <name>"
//   admin <bootstrap> group-offsets <group>            -> "COMMITTED <topic> <p> <offset>" (listConsumerGroupOffsets)
//   admin <bootstrap> reassign <topic> <p> <broker,broker,...>
//       alterPartitionReassignments with Optional.of(new NewPartitionReassignment(brokers)); one JSON line:
//       {"call":"reassign","topic":t,"partition":p,"result":"ok"} or, when the partition's future fails,
//       {"call":"reassign","topic":t,"partition":p,"error":"<exception class>","message":"..."} (exit status 0)
//   admin <bootstrap> cancel-reassign <topic> <p>      -> the same line with "call":"cancel-reassign" (Optional.empty())
//   admin <bootstrap> list-reassign
//       listPartitionReassignments(); one JSON line per partition being moved:
//       {"topic":t,"partition":p,"replicas":[..],"addingReplicas":[..],"removingReplicas":[..]}
//   admin <bootstrap> elect <preferred|unclean> <topic> <p,p,...>
//       electLeaders(ElectionType.PREFERRED / UNCLEAN, those partitions); one JSON line per partition
//       of the result, by topic and partition: {"call":"elect","topic":t,"partition":p,"result":"ok"}
//       or {"call":"elect","topic":t,"partition":p,"error":"<exception class>","message":"..."};
//       a failure of the whole call: {"call":"elect","error":...,"message":...} (exit status 0)
//   admin <bootstrap> elect <preferred|unclean> all    -> the same with null partitions (every partition)
//   admin <bootstrap> producers <topic> <p,p,...>
//       describeProducers of those partitions (each asked of its leader); one JSON line per active
//       producer, by partition: {"partition":p,"producerId":..,"producerEpoch":..,"lastSequence":..,
//       "lastTimestamp":..,"coordinatorEpoch":..,"currentTransactionStartOffset":..} (-1 when absent)
//   admin <bootstrap> authorized-ops <topic> <group>
//       describeTopics / describeCluster / describeConsumerGroups with includeAuthorizedOperations(true);
//       "OPS topic|cluster|group <names sorted, comma-separated>" ("OPS <kind> null" when absent)
//   admin <bootstrap> log-dirs <broker> <topic> <p,p,...>
//       describeLogDirs([broker]): one JSON line per log dir {"call":"log-dirs","dir":..,"error":<class or null>,
//       "totalBytes":..,"usableBytes":..,"replicas":[{"topic":..,"partition":..,"size":..,"offsetLag":..,
//       "isFuture":..},..]}; then describeReplicaLogDirs of those partitions on that broker, a line each:
//       {"call":"replica-log-dirs","partition":p,"current":dir|null,"currentLag":..,"future":dir|null,"futureLag":..}
//   admin <bootstrap> alter-quotas <entity> <validate|apply> set:K=V | delete:K ...
//       alterClientQuotas of one entity, "user=alice", "client-id=app", "user=alice,client-id=app",
//       a name <default> for the default entity; {"call":"alter-quotas","result":"ok"} or
//       {"call":"alter-quotas","error":"<exception class>","message":".."} (exit status 0)
//   admin <bootstrap> describe-quotas <strict|loose> [type=name|type=<default>|type=* ...]
//       describeClientQuotas with those filter components (exact, default, any name); a line per
//       entity: {"entity":{"user":"alice"|null,..},"quotas":{"producer_byte_rate":1024.0,..}}, or
//       {"call":"describe-quotas","error":"<exception class>","message":".."}
//   admin <bootstrap> alter-log-dir <broker> <topic> <p> <dir>
//       alterReplicaLogDirs({(topic, p, broker): dir}); {"call":"alter-log-dir","result":"ok"} or
//       {"call":"alter-log-dir","error":"<exception class>","message":".."} (exit status 0)
//   admin <bootstrap> create-acl <TYPE> <name> <PATTERN> <principal> <host> <OPERATION> <PERMISSION>
//       createAcls of one binding (Java's enum names: TOPIC, PREFIXED, READ, ALLOW):
//       {"call":"create-acl","result":"ok"} or {"call":"create-acl","error":"<simple class>","message":".."}
//   admin <bootstrap> describe-acls <TYPE> <name|-> <PATTERN> [principal|-]
//       describeAcls (any host, operation, permission): one JSON line per binding {"resourceType":..,"name":..,
//       "patternType":..,"principal":..,"host":..,"operation":..,"permissionType":..}, then
//       {"call":"describe-acls","result":"ok"}; or the error line
//   admin <bootstrap> delete-acls (<TYPE> <name|-> <PATTERN> <principal|-> <OPERATION> <PERMISSION>)...
//       deleteAcls of those filters (any host): a JSON line per deleted binding, then the ok line; or the error line
//   admin <bootstrap> create-partitions <topic> <count>
//       createPartitions({topic: NewPartitions.increaseTo(count)}); {"call":"create-partitions","result":"ok"} or
//       {"call":"create-partitions","error":"<simple class>","message":".."} (exit status 0)
//   admin <bootstrap> legacy-alter-configs broker|topic NAME validate|apply K=V ...
//       the deprecated Admin.alterConfigs (AlterConfigs, the whole config of the resource): {"result":"ok"} or
//       {"result":"<simple class>","message":".."}, as alter-configs answers IncrementalAlterConfigs;
//       kafka-clients 4.x has no such call: "ERROR java.lang.UnsupportedOperationException: ..." (exit 1)
//   admin <bootstrap> script
//       many calls through one Admin (compat-tests/test_acl_matrix.py): one call a line on stdin
//       (create-topic T, delete-topic T, create-partitions T N, describe-configs topic|broker NAME,
//       alter-configs topic|broker NAME K=V, describe-group G, list-groups, delete-group G,
//       list-group-offsets G, delete-group-offsets G T P, describe-log-dirs B, elect T P, list-offsets T P,
//       describe-topic T, list-topics, delete-records T P OFFSET, describe-producers T P,
//       list-reassignments, describe-transaction X, list-transactions, describe-scram), one JSON line each:
//       {"call":"<line>","result":"ok"[,"value":..]} or {"call":"<line>","error":"<simple class>","message":".."}
//   admin <bootstrap> describe-configs-full broker|topic NAME
//       describeConfigs with synonyms: one JSON line per config, the describe-configs fields plus
//       "sensitive" and "type" (ConfigEntry.ConfigType's name)
//   spark <bootstrap> <topic> <timeout_ms>
//       the connector's read path: describeTopics, listOffsets earliest+latest, then per partition a
//       consumer (group.id set, auto.offset.reset=none, no auto commit) assign+seek+poll up to latest.
//       stdout: "RANGE <p> <earliest> <latest>", "REC ..." lines, "DONE <n>"
//   group-member <bootstrap> <group> <topic> <range|roundrobin|cooperative-sticky|-> [group.instance.id|-] [K=V ...]
//       a consumer-group member for compat-tests/groupkit.py (test_groups_families.py): subscribe, poll,
//       commitSync after each non-empty batch; JSON lines on stdout: {"event":"assigned","partitions":[..],
//       "t":<wall seconds>} (the whole assignment after every onPartitionsAssigned, and what is left after
//       a non-empty onPartitionsRevoked / onPartitionsLost: groupkit's single-owner check),
//       {"event":"record",...} per record, {"event":"committed","offsets":{...}}, and {"event":"closed"}
//       after SIGTERM closed the consumer (a shutdown hook wakes the poll thread up; exit status 0 once it
//       has closed). Strategy "-": no partition.assignment.strategy (group.protocol=consumer refuses it);
//       K=V: more consumer properties, e.g. group.protocol=consumer (KIP-848, kafka-clients 4.x),
//       group.remote.assignor=uniform, session.timeout.ms=6000, heartbeat.interval.ms=1000 (classic only).
//   acked-producer <bootstrap> <topic> <n> <interval_ms>
//       an idempotent acks=all producer for the cluster tests (test_cluster_java.py): value "v<i>" (key
//       "<i>") to partition i % partitions, one record every interval_ms, until n are sent (n <= 0: no
//       limit) or SIGTERM; then flush and close. JSON lines on stdout, from the send callbacks (so in
//       offset order per partition): {"event":"acked","partition":p,"offset":o,"value":"v<i>"} and
//       {"event":"failed","value":"v<i>","error":"..."}; last {"event":"closed","sent":n} (exit status 0).
//   txn-producer <bootstrap> <topic> <transactional.id> <transaction.timeout.ms>
//       a transactional KafkaProducer (acks=all) driven by compat-tests/txnkit.py, one command a line
//       on stdin, one JSON line on stdout per command: init (initTransactions), begin, commit, abort,
//       send <p>:<value>[,<p>:<value>...] (key = value; sent, flushed, then every future awaited:
//       "acks":[[p,offset],...] in send order), offsets <group> <p>:<offset>[,...]
//       (sendOffsetsToTransaction with new ConsumerGroupMetadata(group)), close. Answer:
//       {"op":"<cmd>","ok":true[,"acks":...]} or {"op":"<cmd>","ok":false,"error":"<class>: <message>",
//       "names":[<class of the exception and of each cause>]}; the producer is closed at "close" or EOF.
//   txn-read <bootstrap> <topic> <read_committed|read_uncommitted> <timeout_ms> <p>:<end>[,...]
//       assign those partitions, seekToBeginning, poll until every position reaches its end (or the
//       timeout); JSON lines: {"event":"record","partition":p,"offset":o,"key":"..","value":".."} per
//       record, then {"event":"done","positions":{"p":o},"end_offsets":{"p":o}} (end_offsets: the
//       consumer's own endOffsets at its isolation level, taken before the first poll).
//
// Any failure: "ERROR <class>: <message>" on stdout and exit status 1.
//
// KBROKER_CLIENT_PROPERTIES=<file>: every client made through common() also gets the properties of
// that file (java.util.Properties format), e.g. security.protocol, sasl.mechanism, sasl.jaas.config,
// ssl.truststore.*, ssl.keystore.* (compat-tests/securitykit.py); they win over common()'s defaults.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.clients.admin.ElectLeadersResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KbrokerHarness {
    private static final long CALL_TIMEOUT_S = 30;
    private static volatile boolean failing = false;

    public static void main(String[] args) {
        try {
            switch (args[0]) {
                case "produce": produce(args[1], args[2], args[3], args[4], false); break;
                case "produce-each": produce(args[1], args[2], args[3], args[4], true); break;
                case "consume":
                    consume(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]), args[5],
                            args.length > 6 ? args[6] : null);
                    break;
                case "admin": admin(args); break;
                case "group-consume":
                    groupConsume(args[1], args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5]));
                    break;
                case "spark": spark(args[1], args[2], Long.parseLong(args[3])); break;
                case "acked-producer":
                    ackedProducer(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
                    break;
                case "txn-producer":
                    txnProducer(args[1], args[2], args[3], Integer.parseInt(args[4]));
                    break;
                case "txn-read":
                    txnRead(args[1], args[2], args[3], Long.parseLong(args[4]), args[5]);
                    break;
                case "group-member":
                    groupMember(args[1], args[2], args[3], args[4],
                            args.length > 5 && !args[5].equals("-") ? args[5] : null,
                            java.util.Arrays.copyOfRange(args, Math.min(6, args.length), args.length));
                    return;  // its shutdown hook ends the JVM
                default: throw new IllegalArgumentException("unknown subcommand " + args[0]);
            }
            System.out.flush();
            System.exit(0);
        } catch (Throwable t) {
            failing = true;
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            System.out.println("ERROR " + root.getClass().getName() + ": "
                    + String.valueOf(root.getMessage()).replace('\n', ' '));
            System.out.flush();
            t.printStackTrace();
            System.exit(1);
        }
    }

    // ---- encoding helpers -------------------------------------------------------------------

    static String b64(byte[] b) {
        return b == null ? "-" : Base64.getEncoder().encodeToString(b);
    }

    static byte[] unb64(String s) {
        return "-".equals(s) ? null : Base64.getDecoder().decode(s);
    }

    static String headers(Iterable<Header> hs) {
        StringBuilder sb = new StringBuilder();
        for (Header h : hs) {
            if (sb.length() > 0) sb.append(',');
            sb.append(b64(h.key().getBytes(StandardCharsets.UTF_8))).append(':').append(b64(h.value()));
        }
        return sb.length() == 0 ? "~" : sb.toString();
    }

    static String rec(ConsumerRecord<byte[], byte[]> r) {
        return "REC " + r.partition() + " " + r.offset() + " " + r.timestamp() + " " + b64(r.key()) + " "
                + b64(r.value()) + " " + headers(r.headers());
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        p.put("reconnect.backoff.max.ms", "1000");
        String extra = System.getenv("KBROKER_CLIENT_PROPERTIES");
        if (extra != null && !extra.isEmpty()) {
            Properties more = new Properties();
            try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Paths.get(extra),
                    StandardCharsets.UTF_8)) {
                more.load(r);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException("KBROKER_CLIENT_PROPERTIES=" + extra, e);
            }
            p.putAll(more);
        }
        return p;
    }

    // ---- produce ----------------------------------------------------------------------------

    static void produce(String bootstrap, String topic, String compression, String acks, boolean each)
            throws Exception {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // enable.idempotence is left at its default (true), as Spark leaves it.
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) continue;
                String[] f = line.split("\t", -1);
                Integer partition = Integer.parseInt(f[0]) < 0 ? null : Integer.parseInt(f[0]);
                Long ts = Long.parseLong(f[1]) < 0 ? null : Long.parseLong(f[1]);
                List<Header> hs = new ArrayList<>();
                if (f.length > 4 && !f[4].isEmpty()) {
                    for (String kv : f[4].split(",")) {
                        String[] parts = kv.split(":", 2);
                        hs.add(new RecordHeader(new String(unb64(parts[0]), StandardCharsets.UTF_8), unb64(parts[1])));
                    }
                }
                futures.add(producer.send(new ProducerRecord<>(topic, partition, ts, unb64(f[2]), unb64(f[3]), hs)));
            }
            producer.flush();
            int i = 0;
            for (Future<RecordMetadata> fut : futures) {
                RecordMetadata md;
                try {
                    md = fut.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!each) throw e;
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    System.out.println("FAIL " + i + " " + cause.getClass().getName() + " "
                            + String.valueOf(cause.getMessage()).replace('\n', ' '));
                    i++;
                    continue;
                }
                System.out.println("ACK " + i + " " + md.partition() + " " + md.offset() + " " + md.timestamp());
                i++;
            }
        }
        System.out.println("DONE " + futures.size());
    }

    // ---- consume ----------------------------------------------------------------------------

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String groupId) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, groupId == null ? "earliest" : "none");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        if (groupId != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void consume(String bootstrap, String topic, int n, long timeoutMs, String seek, String groupId) {
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, groupId)) {
            List<TopicPartition> tps = new ArrayList<>();
            Map<TopicPartition, Long> offsets = new HashMap<>();
            if ("beginning".equals(seek)) {
                c.partitionsFor(topic, Duration.ofSeconds(CALL_TIMEOUT_S))
                        .forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            } else {
                for (String po : seek.split(",")) {
                    String[] x = po.split(":");
                    TopicPartition tp = new TopicPartition(topic, Integer.parseInt(x[0]));
                    tps.add(tp);
                    offsets.put(tp, Long.parseLong(x[1]));
                }
            }
            c.assign(tps);
            if ("beginning".equals(seek)) c.seekToBeginning(tps);
            else offsets.forEach(c::seek);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (got < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    System.out.println(rec(r));
                    got++;
                }
            }
        }
        System.out.println("DONE " + got);
    }

    static void groupConsume(String bootstrap, String topic, String group, int n, long timeoutMs) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> c =
                     new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println(rec(r));
                    got++;
                }
            }
            c.commitSync(Duration.ofSeconds(CALL_TIMEOUT_S));
        }
        System.out.println("DONE " + got);
    }

    // ---- admin ------------------------------------------------------------------------------

    static Admin adminClient(String bootstrap) {
        Properties p = common(bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static Map<Integer, TopicPartitionInfo> describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(Collections.singletonList(topic))
                .allTopicNames().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(topic);
        Map<Integer, TopicPartitionInfo> out = new TreeMap<>();
        for (TopicPartitionInfo tpi : d.partitions()) out.put(tpi.partition(), tpi);
        return out;
    }

    static Map<Integer, ListOffsetsResult.ListOffsetsResultInfo> offsets(
            Admin admin, String topic, java.util.Set<Integer> partitions, OffsetSpec spec) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (int p : partitions) req.put(new TopicPartition(topic, p), spec);
        // Spark's KafkaOffsetReaderAdmin passes the isolation level explicitly.
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res = admin.listOffsets(
                req, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
        Map<Integer, ListOffsetsResult.ListOffsetsResultInfo> out = new TreeMap<>();
        res.forEach((tp, info) -> out.put(tp.partition(), info));
        return out;
    }

    static void admin(String[] args) throws Exception {
        try (Admin admin = adminClient(args[1])) {
            switch (args[2]) {
                case "create":
                    admin.createTopics(Collections.singletonList(
                            new NewTopic(args[3], Integer.parseInt(args[4]), (short) 1)))
                            .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                    System.out.println("CREATED " + args[3]);
                    break;
                case "describe":
                    for (TopicPartitionInfo tpi : describe(admin, args[3]).values()) {
                        StringBuilder reps = new StringBuilder();
                        for (Node n : tpi.replicas()) reps.append(reps.length() > 0 ? "," : "").append(n.id());
                        System.out.println("PARTITION " + tpi.partition() + " "
                                + (tpi.leader() == null ? -1 : tpi.leader().id()) + " " + reps);
                    }
                    break;
                case "offsets": {
                    java.util.Set<Integer> parts = describe(admin, args[3]).keySet();
                    for (int i = 4; i < args.length; i++) {
                        String s = args[i];
                        OffsetSpec spec = "earliest".equals(s) ? OffsetSpec.earliest()
                                : "latest".equals(s) ? OffsetSpec.latest()
                                : OffsetSpec.forTimestamp(Long.parseLong(s.substring(3)));
                        offsets(admin, args[3], parts, spec).forEach((p, info) -> System.out.println(
                                "OFFSET " + s + " " + p + " " + info.offset() + " " + info.timestamp() + " "
                                        + info.leaderEpoch().map(String::valueOf).orElse("-")));
                    }
                    break;
                }
                case "delete":
                    admin.deleteTopics(Collections.singletonList(args[3])).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                    System.out.println("DELETED " + args[3]);
                    break;
                case "list":
                    for (String t : admin.listTopics().names().get(CALL_TIMEOUT_S, TimeUnit.SECONDS))
                        System.out.println("TOPIC " + t);
                    break;
                case "group-offsets":
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(args[3])
                            .partitionsToOffsetAndMetadata().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).entrySet())
                        if (e.getValue() != null) System.out.println("COMMITTED " + e.getKey().topic() + " "
                                + e.getKey().partition() + " " + e.getValue().offset());
                    break;
                case "reassign": {
                    List<Integer> target = new ArrayList<>();
                    for (String b : args[5].split(",")) target.add(Integer.parseInt(b));
                    reassign(admin, "reassign", args[3], Integer.parseInt(args[4]),
                            Optional.of(new NewPartitionReassignment(target)));
                    break;
                }
                case "cancel-reassign":
                    reassign(admin, "cancel-reassign", args[3], Integer.parseInt(args[4]), Optional.empty());
                    break;
                case "list-reassign":
                    List<Map.Entry<TopicPartition, PartitionReassignment>> moves = new ArrayList<>(admin
                            .listPartitionReassignments().reassignments().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).entrySet());
                    moves.sort(java.util.Comparator.comparing((Map.Entry<TopicPartition, PartitionReassignment> e)
                            -> e.getKey().topic()).thenComparingInt(e -> e.getKey().partition()));
                    for (Map.Entry<TopicPartition, PartitionReassignment> e : moves) {
                        PartitionReassignment r = e.getValue();
                        emit("{\"topic\":" + jsonString(e.getKey().topic()) + ",\"partition\":" + e.getKey().partition()
                                + ",\"replicas\":" + r.replicas() + ",\"addingReplicas\":" + r.addingReplicas()
                                + ",\"removingReplicas\":" + r.removingReplicas() + "}");
                    }
                    break;
                case "elect": {
                    ElectionType type = "preferred".equals(args[3]) ? ElectionType.PREFERRED
                            : "unclean".equals(args[3]) ? ElectionType.UNCLEAN : null;
                    if (type == null) throw new IllegalArgumentException("unknown election type " + args[3]);
                    java.util.Set<TopicPartition> wanted = null;  // null: every partition
                    if (!(args.length == 5 && "all".equals(args[4]))) {
                        wanted = new java.util.HashSet<>();
                        for (String p : args[5].split(",")) wanted.add(new TopicPartition(args[4], Integer.parseInt(p)));
                    }
                    elect(admin, type, wanted);
                    break;
                }
                case "producers": {
                    List<TopicPartition> wanted = new ArrayList<>();
                    for (String p : args[4].split(",")) wanted.add(new TopicPartition(args[3], Integer.parseInt(p)));
                    Map<TopicPartition, DescribeProducersResult.PartitionProducerState> states =
                            admin.describeProducers(wanted).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                    for (TopicPartition tp : wanted)
                        for (ProducerState s : states.get(tp).activeProducers())
                            emit("{\"partition\":" + tp.partition() + ",\"producerId\":" + s.producerId()
                                    + ",\"producerEpoch\":" + s.producerEpoch() + ",\"lastSequence\":" + s.lastSequence()
                                    + ",\"lastTimestamp\":" + s.lastTimestamp()
                                    + ",\"coordinatorEpoch\":" + s.coordinatorEpoch().orElse(-1)
                                    + ",\"currentTransactionStartOffset\":" + s.currentTransactionStartOffset().orElse(-1)
                                    + "}");
                    break;
                }
                case "log-dirs": logDirs(admin, Integer.parseInt(args[3]), args[4], args[5]); break;
                case "alter-log-dir": {
                    TopicPartitionReplica replica = new TopicPartitionReplica(args[4], Integer.parseInt(args[5]),
                            Integer.parseInt(args[3]));
                    try {
                        admin.alterReplicaLogDirs(Collections.singletonMap(replica, args[6]))
                                .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                        emit("{\"call\":\"alter-log-dir\",\"result\":\"ok\"}");
                    } catch (ExecutionException e) {
                        emit("{\"call\":\"alter-log-dir\",\"error\":" + jsonString(e.getCause().getClass().getName())
                                + ",\"message\":" + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
                    }
                    break;
                }
                case "authorized-ops": {
                    TopicDescription t = admin.describeTopics(Collections.singletonList(args[3]),
                            new DescribeTopicsOptions().includeAuthorizedOperations(true))
                            .allTopicNames().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(args[3]);
                    System.out.println("OPS topic " + opNames(t.authorizedOperations()));
                    System.out.println("OPS cluster " + opNames(admin.describeCluster(
                            new DescribeClusterOptions().includeAuthorizedOperations(true))
                            .authorizedOperations().get(CALL_TIMEOUT_S, TimeUnit.SECONDS)));
                    ConsumerGroupDescription g = admin.describeConsumerGroups(Collections.singletonList(args[4]),
                            new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                            .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(args[4]);
                    System.out.println("OPS group " + opNames(g.authorizedOperations()));
                    break;
                }
                case "describe-configs":  // broker|topic NAME: one JSON line per config, synonyms included
                    describeConfigs(admin, configResource(args[3], args[4]));
                    break;
                case "alter-configs": {  // broker|topic NAME validate|apply set:K=V | delete:K | append:K=V ...
                    List<org.apache.kafka.clients.admin.AlterConfigOp> ops = new ArrayList<>();
                    for (int i = 6; i < args.length; i++) {
                        String[] kind = args[i].split(":", 2);
                        String[] kv = kind[1].split("=", 2);
                        ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(
                                new org.apache.kafka.clients.admin.ConfigEntry(kv[0], kv.length > 1 ? kv[1] : null),
                                org.apache.kafka.clients.admin.AlterConfigOp.OpType.valueOf(kind[0].toUpperCase())));
                    }
                    org.apache.kafka.common.config.ConfigResource resource = configResource(args[3], args[4]);
                    try {
                        admin.incrementalAlterConfigs(Collections.singletonMap(resource, ops),
                                new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly("validate".equals(args[5])))
                                .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                        emit("{\"result\":\"ok\"}");
                    } catch (ExecutionException e) {  // the broker's answer, not a harness failure
                        emit("{\"result\":" + jsonString(e.getCause().getClass().getSimpleName()) + ",\"message\":"
                                + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
                    }
                    break;
                }
                case "alter-quotas": alterQuotas(admin, args); break;
                case "describe-quotas": describeQuotas(admin, args); break;
                case "create-acl":  // TYPE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION (compat-tests/test_acls_admin.py)
                    createAcl(admin, args);
                    break;
                case "describe-acls":  // TYPE NAME|- PATTERN [PRINCIPAL|-]
                    describeAcls(admin, args);
                    break;
                case "delete-acls":  // (TYPE NAME|- PATTERN PRINCIPAL|- OPERATION PERMISSION)... one filter per six
                    deleteAcls(admin, args);
                    break;
                case "create-partitions": createPartitions(admin, args[3], Integer.parseInt(args[4])); break;
                case "legacy-alter-configs": legacyAlterConfigs(admin, args); break;
                case "describe-configs-full": describeConfigsFull(admin, configResource(args[3], args[4])); break;
                case "script": adminScript(admin); break;  // one call a line on stdin (compat-tests/aclkit.py)
                default:
                    throw new IllegalArgumentException("unknown admin call " + args[2]);
            }
        }
    }

    static Map<String, String> quotaEntity(String spec) {
        Map<String, String> entity = new HashMap<>();
        for (String part : spec.split(",")) {
            String[] kv = part.split("=", 2);
            entity.put(kv[0], "<default>".equals(kv[1]) ? null : kv[1]);
        }
        return entity;
    }

    static void alterQuotas(Admin admin, String[] args) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaAlteration.Op> ops = new ArrayList<>();
        for (int i = 5; i < args.length; i++) {
            String[] kind = args[i].split(":", 2);
            String[] kv = kind[1].split("=", 2);
            ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(kv[0],
                    "set".equals(kind[0]) ? Double.valueOf(kv[1]) : null));
        }
        org.apache.kafka.common.quota.ClientQuotaAlteration alteration = new org.apache.kafka.common.quota.ClientQuotaAlteration(
                new org.apache.kafka.common.quota.ClientQuotaEntity(quotaEntity(args[3])), ops);
        try {
            admin.alterClientQuotas(Collections.singletonList(alteration),
                    new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly("validate".equals(args[4])))
                    .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"call\":\"alter-quotas\",\"result\":\"ok\"}");
        } catch (ExecutionException e) {  // the broker's answer, not a harness failure
            emit("{\"call\":\"alter-quotas\",\"error\":" + jsonString(e.getCause().getClass().getSimpleName())
                    + ",\"message\":" + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
        }
    }

    static void describeQuotas(Admin admin, String[] args) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaFilterComponent> components = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            components.add("*".equals(kv[1]) ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntityType(kv[0])
                    : "<default>".equals(kv[1]) ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity(kv[0])
                    : org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(kv[0], kv[1]));
        }
        org.apache.kafka.common.quota.ClientQuotaFilter filter = "strict".equals(args[3])
                ? org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(components)
                : org.apache.kafka.common.quota.ClientQuotaFilter.contains(components);
        Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> found;
        try {
            found = admin.describeClientQuotas(filter).entities().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            emit("{\"call\":\"describe-quotas\",\"error\":" + jsonString(e.getCause().getClass().getSimpleName())
                    + ",\"message\":" + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
            return;
        }
        for (Map.Entry<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
            StringBuilder entity = new StringBuilder();
            for (Map.Entry<String, String> part : new TreeMap<>(e.getKey().entries()).entrySet())
                entity.append(entity.length() > 0 ? "," : "").append(jsonString(part.getKey())).append(":")
                        .append(part.getValue() == null ? "null" : jsonString(part.getValue()));
            StringBuilder quotas = new StringBuilder();
            for (Map.Entry<String, Double> q : new TreeMap<>(e.getValue()).entrySet())
                quotas.append(quotas.length() > 0 ? "," : "").append(jsonString(q.getKey())).append(":").append(q.getValue());
            emit("{\"entity\":{" + entity + "},\"quotas\":{" + quotas + "}}");
        }
    }

    static org.apache.kafka.common.config.ConfigResource configResource(String type, String name) {
        return new org.apache.kafka.common.config.ConfigResource(
                org.apache.kafka.common.config.ConfigResource.Type.valueOf(type.toUpperCase()), "-".equals(name) ? "" : name);
    }

    static void describeConfigs(Admin admin, org.apache.kafka.common.config.ConfigResource resource) throws Exception {
        org.apache.kafka.clients.admin.Config config = admin.describeConfigs(Collections.singletonList(resource),
                new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(true))
                .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(resource);
        for (org.apache.kafka.clients.admin.ConfigEntry e : config.entries()) {
            StringBuilder syn = new StringBuilder();
            for (org.apache.kafka.clients.admin.ConfigEntry.ConfigSynonym s : e.synonyms())
                syn.append(syn.length() > 0 ? "," : "").append("[").append(jsonString(s.name())).append(",")
                        .append(s.value() == null ? "null" : jsonString(s.value())).append(",")
                        .append(jsonString(s.source().name())).append("]");
            emit("{\"name\":" + jsonString(e.name()) + ",\"value\":" + (e.value() == null ? "null" : jsonString(e.value()))
                    + ",\"source\":" + jsonString(e.source().name()) + ",\"readOnly\":" + e.isReadOnly()
                    + ",\"synonyms\":[" + syn + "]}");
        }
    }

    static String opNames(java.util.Set<org.apache.kafka.common.acl.AclOperation> ops) {
        if (ops == null) return "null";
        List<String> names = new ArrayList<>();
        for (org.apache.kafka.common.acl.AclOperation op : ops) names.add(op.name());
        Collections.sort(names);
        return String.join(",", names);
    }

    /** One partition's alterPartitionReassignments call; its outcome, success or the Kafka error, as a JSON line. */
    static void reassign(Admin admin, String call, String topic, int partition,
                         Optional<NewPartitionReassignment> target) throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        String head = "{\"call\":" + jsonString(call) + ",\"topic\":" + jsonString(topic) + ",\"partition\":" + partition;
        try {
            admin.alterPartitionReassignments(Collections.singletonMap(tp, target)).values().get(tp)
                    .get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            emit(head + ",\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            emit(head + ",\"error\":" + jsonString(cause.getClass().getName()) + ",\"message\":"
                    + jsonString(String.valueOf(cause.getMessage())) + "}");
        }
    }

    /** One electLeaders call; each partition's outcome, success or the Kafka error, as a JSON line. */
    static void elect(Admin admin, ElectionType type, java.util.Set<TopicPartition> partitions) throws Exception {
        ElectLeadersResult result = admin.electLeaders(type, partitions);
        Map<TopicPartition, Optional<Throwable>> outcomes;
        try {
            outcomes = result.partitions().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            emit("{\"call\":\"elect\",\"error\":" + jsonString(cause.getClass().getName()) + ",\"message\":"
                    + jsonString(String.valueOf(cause.getMessage())) + "}");
            return;
        }
        List<TopicPartition> tps = new ArrayList<>(outcomes.keySet());
        tps.sort(java.util.Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        for (TopicPartition tp : tps) {
            String head = "{\"call\":\"elect\",\"topic\":" + jsonString(tp.topic()) + ",\"partition\":" + tp.partition();
            Optional<Throwable> error = outcomes.get(tp);
            if (error.isPresent()) {
                emit(head + ",\"error\":" + jsonString(error.get().getClass().getName()) + ",\"message\":"
                        + jsonString(String.valueOf(error.get().getMessage())) + "}");
            } else {
                emit(head + ",\"result\":\"ok\"}");
            }
        }
    }

    // ---- CreatePartitions, the deprecated AlterConfigs, DescribeConfigs with every field (issue 22:
    // test_create_partitions_decrease.py, test_cluster_decrease.py, test_broker_custom_configs.py,
    // test_topic_configs_39.py); the broker's refusal is a JSON line, not a harness failure

    static void createPartitions(Admin admin, String topic, int count) throws Exception {
        try {
            admin.createPartitions(Collections.singletonMap(topic,
                    org.apache.kafka.clients.admin.NewPartitions.increaseTo(count))).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"call\":\"create-partitions\",\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            emit("{\"call\":\"create-partitions\",\"error\":" + jsonString(e.getCause().getClass().getSimpleName())
                    + ",\"message\":" + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
        }
    }

    static void legacyAlterConfigs(Admin admin, String[] args) throws Exception {
        org.apache.kafka.common.config.ConfigResource resource = configResource(args[3], args[4]);
        List<org.apache.kafka.clients.admin.ConfigEntry> entries = new ArrayList<>();
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            entries.add(new org.apache.kafka.clients.admin.ConfigEntry(kv[0], kv.length > 1 ? kv[1] : ""));
        }
        // Admin.alterConfigs(Map<ConfigResource, Config>, AlterConfigsOptions): in 3.9, removed in 4.0
        java.lang.reflect.Method alterConfigs;
        try {
            alterConfigs = Admin.class.getMethod("alterConfigs", Map.class,
                    org.apache.kafka.clients.admin.AlterConfigsOptions.class);
        } catch (NoSuchMethodException e) {
            throw new UnsupportedOperationException("kafka-clients "
                    + org.apache.kafka.common.utils.AppInfoParser.getVersion() + " has no Admin.alterConfigs");
        }
        try {
            org.apache.kafka.clients.admin.AlterConfigsResult result;
            try {
                result = (org.apache.kafka.clients.admin.AlterConfigsResult) alterConfigs.invoke(admin,
                        Collections.singletonMap(resource, new org.apache.kafka.clients.admin.Config(entries)),
                        new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly("validate".equals(args[5])));
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
            }
            result.all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            emit("{\"result\":" + jsonString(e.getCause().getClass().getSimpleName()) + ",\"message\":"
                    + jsonString(String.valueOf(e.getCause().getMessage())) + "}");
        }
    }

    static void describeConfigsFull(Admin admin, org.apache.kafka.common.config.ConfigResource resource) throws Exception {
        org.apache.kafka.clients.admin.Config config = admin.describeConfigs(Collections.singletonList(resource),
                new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(true))
                .all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(resource);
        for (org.apache.kafka.clients.admin.ConfigEntry e : config.entries()) {
            StringBuilder syn = new StringBuilder();
            for (org.apache.kafka.clients.admin.ConfigEntry.ConfigSynonym s : e.synonyms())
                syn.append(syn.length() > 0 ? "," : "").append("[").append(jsonString(s.name())).append(",")
                        .append(s.value() == null ? "null" : jsonString(s.value())).append(",")
                        .append(jsonString(s.source().name())).append("]");
            emit("{\"name\":" + jsonString(e.name()) + ",\"value\":" + (e.value() == null ? "null" : jsonString(e.value()))
                    + ",\"source\":" + jsonString(e.source().name()) + ",\"readOnly\":" + e.isReadOnly()
                    + ",\"sensitive\":" + e.isSensitive() + ",\"type\":" + jsonString(e.type().name())
                    + ",\"synonyms\":[" + syn + "]}");
        }
    }

    // ---- the Spark connector's read path ----------------------------------------------------

    static void spark(String bootstrap, String topic, long timeoutMs) throws Exception {
        Map<Integer, ListOffsetsResult.ListOffsetsResultInfo> earliest;
        Map<Integer, ListOffsetsResult.ListOffsetsResultInfo> latest;
        try (Admin admin = adminClient(bootstrap)) {
            java.util.Set<Integer> parts = describe(admin, topic).keySet();
            earliest = offsets(admin, topic, parts, OffsetSpec.earliest());
            latest = offsets(admin, topic, parts, OffsetSpec.latest());
        }
        int got = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        for (int p : earliest.keySet()) {
            long from = earliest.get(p).offset();
            long until = latest.get(p).offset();
            System.out.println("RANGE " + p + " " + from + " " + until);
            if (from >= until) continue;
            // One cached consumer per task, as in Spark's KafkaDataConsumer.
            try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, "spark-kafka-source-kbroker-executor")) {
                TopicPartition tp = new TopicPartition(topic, p);
                c.assign(Collections.singletonList(tp));
                c.seek(tp, from);
                long next = from;
                while (next < until && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500)).records(tp)) {
                        if (r.offset() >= until) break;
                        System.out.println(rec(r));
                        next = r.offset() + 1;
                        got++;
                    }
                }
                if (next < until) throw new IllegalStateException(
                        "partition " + p + " stopped at offset " + next + " before latest " + until);
            }
        }
        System.out.println("DONE " + got);
    }

    // ---- transactions: a scripted transactional producer and a reader at an isolation level ----

    static String causeNames(Throwable t) {
        StringBuilder sb = new StringBuilder("[");
        java.util.Set<Throwable> seen = new java.util.HashSet<>();
        for (Throwable c = t; c != null && seen.add(c); c = c.getCause()) {
            if (sb.length() > 1) sb.append(',');
            sb.append(jsonString(c.getClass().getName()));
        }
        return sb.append(']').toString();
    }

    static void txnProducer(String bootstrap, String topic, String transactionalId, int timeoutMs) throws Exception {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(timeoutMs));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.trim().split(" ");
                String op = f[0];
                if (op.isEmpty()) continue;
                if ("close".equals(op)) break;
                String head = "{\"op\":" + jsonString(op);
                try {
                    String extra = "";
                    switch (op) {
                        case "init": producer.initTransactions(); break;
                        case "begin": producer.beginTransaction(); break;
                        case "commit": producer.commitTransaction(); break;
                        case "abort": producer.abortTransaction(); break;
                        case "send": {
                            List<Future<RecordMetadata>> futures = new ArrayList<>();
                            for (String pv : f[1].split(",")) {
                                String[] x = pv.split(":", 2);
                                byte[] v = x[1].getBytes(StandardCharsets.UTF_8);
                                futures.add(producer.send(new ProducerRecord<>(topic, Integer.parseInt(x[0]), v, v)));
                            }
                            producer.flush();
                            StringBuilder acks = new StringBuilder();
                            for (Future<RecordMetadata> fut : futures) {
                                RecordMetadata md = fut.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                                acks.append(acks.length() > 0 ? "," : "").append('[').append(md.partition())
                                        .append(',').append(md.offset()).append(']');
                            }
                            extra = ",\"acks\":[" + acks + "]";
                            break;
                        }
                        case "offsets": {
                            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                            for (String po : f[2].split(",")) {
                                String[] x = po.split(":");
                                offsets.put(new TopicPartition(topic, Integer.parseInt(x[0])),
                                        new OffsetAndMetadata(Long.parseLong(x[1])));
                            }
                            producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(f[1]));
                            break;
                        }
                        default: throw new IllegalArgumentException("unknown txn-producer command " + op);
                    }
                    emit(head + ",\"ok\":true" + extra + "}");
                } catch (Exception e) {
                    Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    emit(head + ",\"ok\":false,\"error\":" + jsonString(cause.getClass().getName() + ": "
                            + cause.getMessage()) + ",\"names\":" + causeNames(e) + "}");
                }
            }
            producer.close(Duration.ofSeconds(5));
        }
        emit("{\"op\":\"close\",\"ok\":true}");
    }

    static String offsetsJson(Map<TopicPartition, Long> m) {
        StringBuilder sb = new StringBuilder("{");
        new TreeMap<>(m.entrySet().stream().collect(java.util.stream.Collectors.toMap(
                e -> e.getKey().partition(), Map.Entry::getValue))).forEach((part, off) ->
                sb.append(sb.length() > 1 ? "," : "").append('"').append(part).append("\":").append(off));
        return sb.append('}').toString();
    }

    static void txnRead(String bootstrap, String topic, String isolation, long timeoutMs, String ends) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        Map<TopicPartition, Long> want = new HashMap<>();
        for (String pe : ends.split(",")) {
            String[] x = pe.split(":");
            want.put(new TopicPartition(topic, Integer.parseInt(x[0])), Long.parseLong(x[1]));
        }
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(want.keySet());
            c.seekToBeginning(want.keySet());
            Map<TopicPartition, Long> clientEnds = c.endOffsets(want.keySet(), Duration.ofSeconds(CALL_TIMEOUT_S));
            long deadline = System.currentTimeMillis() + timeoutMs;
            Map<TopicPartition, Long> positions = new HashMap<>();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : want.keySet()) {
                    long pos = c.position(tp, Duration.ofSeconds(CALL_TIMEOUT_S));
                    positions.put(tp, pos);
                    if (pos < want.get(tp)) done = false;
                }
                if (done || System.currentTimeMillis() >= deadline) break;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    emit("{\"event\":\"record\",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"key\":" + jsonString(r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8))
                            + ",\"value\":" + jsonString(r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8))
                            + "}");
                }
            }
            emit("{\"event\":\"done\",\"positions\":" + offsetsJson(positions) + ",\"end_offsets\":"
                    + offsetsJson(clientEnds) + "}");
        }
    }

    // ---- a consumer-group member ------------------------------------------------------------

    static final Map<String, String> ASSIGNORS = Map.of(
            "range", "org.apache.kafka.clients.consumer.RangeAssignor",
            "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");

    static void logDirs(Admin admin, int broker, String topic, String partitions) throws Exception {
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(Collections.singletonList(broker))
                .allDescriptions().get(CALL_TIMEOUT_S, TimeUnit.SECONDS).get(broker);
        for (Map.Entry<String, LogDirDescription> d : new TreeMap<>(dirs).entrySet()) {
            LogDirDescription desc = d.getValue();
            StringBuilder replicas = new StringBuilder();
            for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                replicas.append(replicas.length() > 0 ? "," : "").append("{\"topic\":")
                        .append(jsonString(r.getKey().topic())).append(",\"partition\":").append(r.getKey().partition())
                        .append(",\"size\":").append(r.getValue().size()).append(",\"offsetLag\":")
                        .append(r.getValue().offsetLag()).append(",\"isFuture\":").append(r.getValue().isFuture())
                        .append("}");
            }
            emit("{\"call\":\"log-dirs\",\"dir\":" + jsonString(d.getKey()) + ",\"error\":"
                    + (desc.error() == null ? "null" : jsonString(desc.error().getClass().getName()))
                    + ",\"totalBytes\":" + desc.totalBytes().orElse(-1) + ",\"usableBytes\":"
                    + desc.usableBytes().orElse(-1) + ",\"replicas\":[" + replicas + "]}");
        }
        List<TopicPartitionReplica> wanted = new ArrayList<>();
        for (String p : partitions.split(",")) wanted.add(new TopicPartitionReplica(topic, Integer.parseInt(p), broker));
        Map<TopicPartitionReplica, DescribeReplicaLogDirsResult.ReplicaLogDirInfo> infos =
                admin.describeReplicaLogDirs(wanted).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
        for (TopicPartitionReplica r : wanted) {
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo info = infos.get(r);
            emit("{\"call\":\"replica-log-dirs\",\"partition\":" + r.partition() + ",\"current\":"
                    + (info.getCurrentReplicaLogDir() == null ? "null" : jsonString(info.getCurrentReplicaLogDir()))
                    + ",\"currentLag\":" + info.getCurrentReplicaOffsetLag() + ",\"future\":"
                    + (info.getFutureReplicaLogDir() == null ? "null" : jsonString(info.getFutureReplicaLogDir()))
                    + ",\"futureLag\":" + info.getFutureReplicaOffsetLag() + "}");
        }
    }

    // ---- ACLs: Admin.createAcls / describeAcls / deleteAcls, enum names as Java spells them (TOPIC,
    // PREFIXED, READ, ALLOW), "-" for a null name/principal; the broker's refusal is a JSON line too.

    static String aclJson(org.apache.kafka.common.acl.AclBinding b) {
        return "{\"resourceType\":" + jsonString(b.pattern().resourceType().name()) + ",\"name\":"
                + jsonString(b.pattern().name()) + ",\"patternType\":" + jsonString(b.pattern().patternType().name())
                + ",\"principal\":" + jsonString(b.entry().principal()) + ",\"host\":" + jsonString(b.entry().host())
                + ",\"operation\":" + jsonString(b.entry().operation().name()) + ",\"permissionType\":"
                + jsonString(b.entry().permissionType().name()) + "}";
    }

    static String aclError(String call, Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return "{\"call\":" + jsonString(call) + ",\"error\":" + jsonString(cause.getClass().getSimpleName())
                + ",\"message\":" + jsonString(String.valueOf(cause.getMessage())) + "}";
    }

    static String orNull(String s) {
        return "-".equals(s) ? null : s;
    }

    static void createAcl(Admin admin, String[] args) throws Exception {
        org.apache.kafka.common.acl.AclBinding binding = new org.apache.kafka.common.acl.AclBinding(
                new org.apache.kafka.common.resource.ResourcePattern(
                        org.apache.kafka.common.resource.ResourceType.valueOf(args[3]), args[4],
                        org.apache.kafka.common.resource.PatternType.valueOf(args[5])),
                new org.apache.kafka.common.acl.AccessControlEntry(args[6], args[7],
                        org.apache.kafka.common.acl.AclOperation.valueOf(args[8]),
                        org.apache.kafka.common.acl.AclPermissionType.valueOf(args[9])));
        try {
            admin.createAcls(Collections.singletonList(binding)).all().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
            emit("{\"call\":\"create-acl\",\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            emit(aclError("create-acl", e));
        }
    }

    static void describeAcls(Admin admin, String[] args) throws Exception {
        org.apache.kafka.common.acl.AclBindingFilter filter = new org.apache.kafka.common.acl.AclBindingFilter(
                new org.apache.kafka.common.resource.ResourcePatternFilter(
                        org.apache.kafka.common.resource.ResourceType.valueOf(args[3]), orNull(args[4]),
                        org.apache.kafka.common.resource.PatternType.valueOf(args[5])),
                new org.apache.kafka.common.acl.AccessControlEntryFilter(args.length > 6 ? orNull(args[6]) : null, null,
                        org.apache.kafka.common.acl.AclOperation.ANY, org.apache.kafka.common.acl.AclPermissionType.ANY));
        try {
            for (org.apache.kafka.common.acl.AclBinding b : admin.describeAcls(filter).values()
                    .get(CALL_TIMEOUT_S, TimeUnit.SECONDS))
                emit(aclJson(b));
            emit("{\"call\":\"describe-acls\",\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            emit(aclError("describe-acls", e));
        }
    }

    static void deleteAcls(Admin admin, String[] args) throws Exception {
        List<org.apache.kafka.common.acl.AclBindingFilter> filters = new ArrayList<>();
        for (int i = 3; i + 5 < args.length; i += 6)
            filters.add(new org.apache.kafka.common.acl.AclBindingFilter(
                    new org.apache.kafka.common.resource.ResourcePatternFilter(
                            org.apache.kafka.common.resource.ResourceType.valueOf(args[i]), orNull(args[i + 1]),
                            org.apache.kafka.common.resource.PatternType.valueOf(args[i + 2])),
                    new org.apache.kafka.common.acl.AccessControlEntryFilter(orNull(args[i + 3]), null,
                            org.apache.kafka.common.acl.AclOperation.valueOf(args[i + 4]),
                            org.apache.kafka.common.acl.AclPermissionType.valueOf(args[i + 5]))));
        try {
            for (org.apache.kafka.common.acl.AclBinding b : admin.deleteAcls(filters).all()
                    .get(CALL_TIMEOUT_S, TimeUnit.SECONDS))
                emit(aclJson(b));
            emit("{\"call\":\"delete-acls\",\"result\":\"ok\"}");
        } catch (ExecutionException e) {
            emit(aclError("delete-acls", e));
        }
    }

    // ---- admin script (compat-tests/aclkit.py: the ACL matrix) -------------------------------------
    // One Admin, many calls: a line on stdin is a call and its arguments separated by spaces, a JSON
    // line on stdout its outcome, {"call":"<line>","result":"ok"[,"value":..]} or
    // {"call":"<line>","error":"<simple exception class>","message":".."}; the broker's refusals are
    // outcomes, not failures of the harness.

    static void adminScript(Admin admin) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            try {
                String value = scriptCall(admin, line.split(" "));
                emit("{\"call\":" + jsonString(line) + ",\"result\":\"ok\"" + (value == null ? "" : ",\"value\":" + value) + "}");
            } catch (ExecutionException | org.apache.kafka.common.KafkaException e) {
                Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                emit("{\"call\":" + jsonString(line) + ",\"error\":" + jsonString(c.getClass().getSimpleName())
                        + ",\"message\":" + jsonString(String.valueOf(c.getMessage())) + "}");
            }
        }
    }

    static String jsonStrings(java.util.Collection<String> items) {
        List<String> sorted = new ArrayList<>(items);
        Collections.sort(sorted);
        StringBuilder sb = new StringBuilder("[");
        for (String s : sorted) sb.append(sb.length() > 1 ? "," : "").append(jsonString(s));
        return sb.append("]").toString();
    }

    static String scriptCall(Admin admin, String[] a) throws Exception {
        long t = CALL_TIMEOUT_S;
        TimeUnit s = TimeUnit.SECONDS;
        switch (a[0]) {
            case "create-topic":  // T
                admin.createTopics(Collections.singletonList(new NewTopic(a[1], 1, (short) 1))).all().get(t, s);
                return null;
            case "delete-topic":  // T
                admin.deleteTopics(Collections.singletonList(a[1])).all().get(t, s);
                return null;
            case "create-partitions":  // T N
                admin.createPartitions(Collections.singletonMap(a[1],
                        org.apache.kafka.clients.admin.NewPartitions.increaseTo(Integer.parseInt(a[2])))).all().get(t, s);
                return null;
            case "describe-configs": {  // topic|broker NAME
                org.apache.kafka.common.config.ConfigResource r = configResource(a[1], a[2]);
                return String.valueOf(admin.describeConfigs(Collections.singletonList(r)).all().get(t, s).get(r)
                        .entries().size());
            }
            case "alter-configs": {  // topic|broker NAME K=V
                String[] kv = a[3].split("=", 2);
                admin.incrementalAlterConfigs(Collections.singletonMap(configResource(a[1], a[2]),
                        Collections.singletonList(new org.apache.kafka.clients.admin.AlterConfigOp(
                                new org.apache.kafka.clients.admin.ConfigEntry(kv[0], kv[1]),
                                org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all().get(t, s);
                return null;
            }
            case "describe-group":  // G
                return jsonString(admin.describeConsumerGroups(Collections.singletonList(a[1])).all().get(t, s)
                        .get(a[1]).state().toString());
            case "list-groups": {
                List<String> ids = new ArrayList<>();
                for (org.apache.kafka.clients.admin.ConsumerGroupListing g : admin.listConsumerGroups().all().get(t, s))
                    ids.add(g.groupId());
                return jsonStrings(ids);
            }
            case "delete-group":  // G
                admin.deleteConsumerGroups(Collections.singletonList(a[1])).all().get(t, s);
                return null;
            case "list-group-offsets": {  // G
                Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(a[1])
                        .partitionsToOffsetAndMetadata().get(t, s);
                List<String> tps = new ArrayList<>();
                for (TopicPartition tp : m.keySet()) tps.add(tp.topic() + ":" + tp.partition());
                return jsonStrings(tps);
            }
            case "delete-group-offsets":  // G T P
                admin.deleteConsumerGroupOffsets(a[1], java.util.Collections.singleton(
                        new TopicPartition(a[2], Integer.parseInt(a[3])))).all().get(t, s);
                return null;
            case "describe-log-dirs":  // BROKER
                return String.valueOf(admin.describeLogDirs(Collections.singletonList(Integer.parseInt(a[1])))
                        .allDescriptions().get(t, s).get(Integer.parseInt(a[1])).size());
            case "elect":  // T P: the partition's outcome as the value ("none" or its exception class)
            {
                TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                Optional<Throwable> r = admin.electLeaders(ElectionType.PREFERRED, java.util.Collections.singleton(tp))
                        .partitions().get(t, s).get(tp);
                return jsonString(r.isPresent() ? r.get().getClass().getSimpleName() : "none");
            }
            case "list-offsets": {  // T P
                TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                return String.valueOf(admin.listOffsets(Collections.singletonMap(tp, OffsetSpec.latest()))
                        .all().get(t, s).get(tp).offset());
            }
            case "describe-topic":  // T
                return String.valueOf(admin.describeTopics(Collections.singletonList(a[1])).allTopicNames().get(t, s)
                        .get(a[1]).partitions().size());
            case "list-topics":
                return jsonStrings(admin.listTopics().names().get(t, s));
            case "delete-records": {  // T P OFFSET
                TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                admin.deleteRecords(Collections.singletonMap(tp, org.apache.kafka.clients.admin.RecordsToDelete
                        .beforeOffset(Long.parseLong(a[3])))).all().get(t, s);
                return null;
            }
            case "describe-producers": {  // T P
                TopicPartition tp = new TopicPartition(a[1], Integer.parseInt(a[2]));
                return String.valueOf(admin.describeProducers(Collections.singletonList(tp)).all().get(t, s).get(tp)
                        .activeProducers().size());
            }
            case "list-reassignments":
                return String.valueOf(admin.listPartitionReassignments().reassignments().get(t, s).size());
            case "describe-transaction":  // X
                return jsonString(admin.describeTransactions(Collections.singletonList(a[1])).all().get(t, s)
                        .get(a[1]).state().toString());
            case "list-transactions": {
                List<String> ids = new ArrayList<>();
                for (org.apache.kafka.clients.admin.TransactionListing l : admin.listTransactions().all().get(t, s))
                    ids.add(l.transactionalId());
                return jsonStrings(ids);
            }
            case "describe-scram":
                return String.valueOf(admin.describeUserScramCredentials().all().get(t, s).size());
            default:
                throw new IllegalArgumentException("unknown script call " + a[0]);
        }
    }

    static void emit(String json) {
        HarnessOut.emit(json);
    }

    static String jsonString(String s) {
        return HarnessOut.jsonString(s);
    }

    static String wallSeconds() {
        return String.format(java.util.Locale.ROOT, "%.3f", System.currentTimeMillis() / 1000.0);
    }

    static String partitionList(java.util.Collection<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) ps.add(tp.partition());
        Collections.sort(ps);
        return ps.toString();
    }

    static void groupMember(String bootstrap, String group, String topic, String strategy, String instanceId,
                            String[] more) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!strategy.equals("-")) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    java.util.Objects.requireNonNull(ASSIGNORS.get(strategy), "unknown strategy " + strategy));
        }
        if (instanceId != null) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        for (String kv : more) {  // by name: group.protocol is no ConsumerConfig constant in every version
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("expected K=V, got " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        // processed but not yet committed: partition -> next offset
        Map<Integer, Long> pending = new TreeMap<>();
        AtomicBoolean closed = new AtomicBoolean(false);
        Thread pollThread = Thread.currentThread();
        HarnessShutdown.onSigterm("group-member-shutdown", () -> failing, consumer::wakeup, pollThread, closed);

        Runnable commit = () -> {
            if (pending.isEmpty()) return;
            try {
                consumer.commitSync();  // the positions of every assigned partition
            } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
                System.err.println("commit deferred: " + e);  // retried after the next poll
                return;
            } catch (org.apache.kafka.clients.consumer.CommitFailedException e) {
                System.err.println("commit failed: " + e);
                pending.clear();
                return;
            }
            StringBuilder sb = new StringBuilder();
            pending.forEach((part, next) -> sb.append(sb.length() > 0 ? "," : "").append('"').append(part)
                    .append("\":").append(next));
            pending.clear();
            emit("{\"event\":\"committed\",\"offsets\":{" + sb + "}}");
        };

        consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(java.util.Collection<TopicPartition> partitions) {
                commit.run();  // before another member starts from our last commit
                reportWithout(partitions);
            }

            @Override
            public void onPartitionsLost(java.util.Collection<TopicPartition> partitions) {
                pending.clear();  // no longer ours: whoever owns them now starts from the last commit
                reportWithout(partitions);
            }

            @Override
            public void onPartitionsAssigned(java.util.Collection<TopicPartition> partitions) {
                // cooperative-sticky and the consumer protocol pass only the added partitions: report
                // the whole assignment
                java.util.Set<TopicPartition> now = new java.util.HashSet<>(consumer.assignment());
                now.addAll(partitions);
                emit("{\"event\":\"assigned\",\"partitions\":" + partitionList(now) + ",\"t\":" + wallSeconds() + "}");
            }

            private void reportWithout(java.util.Collection<TopicPartition> partitions) {
                if (partitions.isEmpty()) return;
                java.util.Set<TopicPartition> left = new java.util.HashSet<>(consumer.assignment());
                left.removeAll(partitions);  // the callback runs before they are taken away
                emit("{\"event\":\"assigned\",\"partitions\":" + partitionList(left) + ",\"t\":" + wallSeconds() + "}");
            }
        });
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("{\"event\":\"record\",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"key\":" + jsonString(r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8))
                            + "}");
                    pending.put(r.partition(), r.offset() + 1);
                }
                commit.run();
            }
        } catch (WakeupException e) {
            // a wakeup that cut a commit short: commit once more before leaving. The 4.x consumer can
            // keep a wakeup that a fetch already delivered pending for the next call (WakeupTrigger
            // flags both), so that commit may throw it once more; the retry after it is clean.
            for (int attempt = 0; ; attempt++) {
                try {
                    commit.run();
                    break;
                } catch (WakeupException again) {
                    if (attempt >= 2) throw again;
                }
            }
        }
        consumer.close(Duration.ofSeconds(30));  // LeaveGroup
        emit("{\"event\":\"closed\"}");
        closed.set(true);
    }

    // ---- an idempotent producer that reports every acknowledgement ----------------------------

    static void ackedProducer(String bootstrap, String topic, long n, long intervalMs) throws Exception {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        AtomicBoolean stop = new AtomicBoolean(false);
        java.util.concurrent.CountDownLatch closed = new java.util.concurrent.CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (failing || closed.getCount() == 0) return;  // main is exiting with its own status
            stop.set(true);
            boolean done = false;
            try {
                done = closed.await(150, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                // fall through: not closed
            }
            System.out.flush();
            Runtime.getRuntime().halt(done ? 0 : 1);
        }, "acked-producer-shutdown"));
        long sent = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            int partitions = producer.partitionsFor(topic).size();
            long next = System.nanoTime();
            while (!stop.get() && (n <= 0 || sent < n)) {
                String value = "v" + sent;
                producer.send(new ProducerRecord<>(topic, (int) (sent % partitions), null,
                        String.valueOf(sent).getBytes(StandardCharsets.UTF_8),
                        value.getBytes(StandardCharsets.UTF_8)), (md, e) -> {
                    if (e == null) {
                        emit("{\"event\":\"acked\",\"partition\":" + md.partition() + ",\"offset\":" + md.offset()
                                + ",\"value\":" + jsonString(value) + "}");
                    } else {
                        emit("{\"event\":\"failed\",\"value\":" + jsonString(value) + ",\"error\":"
                                + jsonString(e.getClass().getName() + ": " + e.getMessage()) + "}");
                    }
                });
                sent++;
                next += intervalMs * 1_000_000L;
                long sleep = next - System.nanoTime();
                if (sleep > 0) Thread.sleep(sleep / 1_000_000L, (int) (sleep % 1_000_000L));
            }
            producer.flush();
        }
        emit("{\"event\":\"closed\",\"sent\":" + sent + "}");
        closed.countDown();
    }
}
