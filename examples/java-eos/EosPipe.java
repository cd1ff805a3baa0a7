// The exactly-once read-process-write loop written with Apache Kafka's own Java
// client, as the peer that ci/bench-eos.sh measures. Four commands:
//
//   create  --bootstrap B --partitions P --replication R --min-isr M TOPIC...
//           creates the topics (an existing topic is an error, so that every
//           run starts from empty topics).
//   feed    --bootstrap B --topic IN --records N
//           writes N numbered records with an idempotent producer (acks=all):
//           record i has key "i" and value "i", in partition i mod P, so each
//           input partition holds its numbers in increasing order.
//   pipe    --bootstrap B --input IN --output OUT --group G --batch K
//           --transactional-id T [--timeout-s S]
//           the loop: a read_committed consumer with the input's partitions
//           assigned (no group membership, so no rebalance), each partition
//           seeked to G's committed offset (its beginning when G has none); a
//           transactional producer; per transaction K input records (fewer in
//           the last one), one output record each (same key, value "i:piped",
//           in the input record's partition number), the consumed offsets sent
//           with sendOffsetsToTransaction for G, then commitTransaction. It
//           stops once every input partition is consumed up to the end offset
//           it had when the loop started. Prints one JSON line: the records
//           and transactions piped, the setup time (clients created, producer
//           id obtained, offsets fetched), the loop's time from the first
//           beginTransaction to the last commitTransaction returning, the
//           records per second over that time, and the per-transaction times
//           (beginTransaction to commitTransaction returned) at p50 and p99.
//   check   --bootstrap B --output OUT --records N --partitions P
//           reads OUT read_committed from its beginning to its last stable
//           offset and fails (exit 1, naming the first wrong record) unless
//           partition p holds exactly p, p+P, p+2P, ... below N, each once, in
//           that order, with key "i" and value "i:piped": every input's output
//           committed exactly once, in input order.
//
// Every command ends by itself: the loops are bounded by --timeout-s (default
// 600) and exit 2 with a message when it passes. Bad arguments exit 64.
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class EosPipe {
    private EosPipe() {}

    /** A failure the command reports as one line and its exit code. */
    static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int code;

        Failure(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    public static void main(String[] argv) {
        try {
            if (argv.length == 0) {
                throw new Failure(64, "a command is needed: create, feed, pipe or check");
            }
            Args args = new Args(Arrays.copyOfRange(argv, 1, argv.length));
            switch (argv[0]) {
                case "create" -> create(args);
                case "feed" -> feed(args);
                case "pipe" -> pipe(args);
                case "check" -> check(args);
                default -> throw new Failure(64, "unknown command " + argv[0]);
            }
        } catch (Failure f) {
            System.err.println("EosPipe: " + f.getMessage());
            System.exit(f.code);
        }
    }

    /** The --name value options and the positional arguments of a command. */
    static final class Args {
        final Map<String, String> options = new HashMap<>();
        final List<String> positional = new ArrayList<>();

        Args(String[] argv) {
            for (int i = 0; i < argv.length; i++) {
                if (argv[i].startsWith("--")) {
                    if (i + 1 >= argv.length) {
                        throw new Failure(64, argv[i] + " needs a value");
                    }
                    options.put(argv[i].substring(2), argv[++i]);
                } else {
                    positional.add(argv[i]);
                }
            }
        }

        String text(String name) {
            String value = options.get(name);
            if (value == null) {
                throw new Failure(64, "--" + name + " is needed");
            }
            return value;
        }

        int number(String name, Integer fallback) {
            String value = options.get(name);
            if (value == null) {
                if (fallback == null) {
                    throw new Failure(64, "--" + name + " is needed");
                }
                return fallback;
            }
            try {
                int n = Integer.parseInt(value);
                if (n <= 0) {
                    throw new NumberFormatException();
                }
                return n;
            } catch (NumberFormatException e) {
                throw new Failure(64, "--" + name + " must be a positive whole number, got " + value);
            }
        }

        long deadline() {
            return System.nanoTime() + TimeUnit.SECONDS.toNanos(number("timeout-s", 600));
        }
    }

    static void checkDeadline(long deadline, String what) {
        if (System.nanoTime() > deadline) {
            throw new Failure(2, "timed out " + what);
        }
    }

    static void create(Args args) {
        if (args.positional.isEmpty()) {
            throw new Failure(64, "create needs topic names");
        }
        int partitions = args.number("partitions", null);
        short replication = (short) args.number("replication", null);
        String minIsr = Integer.toString(args.number("min-isr", null));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.text("bootstrap"));
        try (Admin admin = Admin.create(props)) {
            List<NewTopic> topics = new ArrayList<>();
            for (String name : args.positional) {
                topics.add(new NewTopic(name, partitions, replication)
                        .configs(Map.of("min.insync.replicas", minIsr)));
            }
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new Failure(1, "creating " + args.positional + " failed: " + e);
        } catch (InterruptedException e) {
            throw new Failure(1, "interrupted");
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId, String extra) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        if (transactionalId != null) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        putSettings(props, extra);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    /** Adds "key=value,key=value" producer settings (none when null or empty). */
    static void putSettings(Properties props, String settings) {
        if (settings == null || settings.isEmpty()) {
            return;
        }
        for (String pair : settings.split(",")) {
            int eq = pair.indexOf('=');
            if (eq <= 0) {
                throw new Failure(64, "--producer-settings takes key=value pairs separated by commas, got " + pair);
            }
            props.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1000");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    /** The topic's partitions, in partition order. */
    static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
        if (infos == null || infos.isEmpty()) {
            throw new Failure(1, "topic " + topic + " does not exist");
        }
        List<TopicPartition> parts = new ArrayList<>();
        for (PartitionInfo info : infos) {
            parts.add(new TopicPartition(topic, info.partition()));
        }
        parts.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return parts;
    }

    static void feed(Args args) {
        String topic = args.text("topic");
        int records = args.number("records", null);
        long deadline = args.deadline();
        int count;
        try (KafkaConsumer<String, String> meta = consumer(args.text("bootstrap"), null)) {
            count = partitions(meta, topic).size();
        }
        try (KafkaProducer<String, String> producer = producer(args.text("bootstrap"), null, null)) {
            for (int i = 0; i < records; i++) {
                String n = Integer.toString(i);
                producer.send(new ProducerRecord<>(topic, i % count, n, n), (md, e) -> {
                    if (e != null) {
                        System.err.println("EosPipe: feed: a send failed: " + e);
                        System.exit(1);
                    }
                });
                if (i % 10000 == 0) {
                    checkDeadline(deadline, "feeding " + topic);
                }
            }
            producer.flush();
        }
    }

    static void pipe(Args args) {
        String bootstrap = args.text("bootstrap");
        String input = args.text("input");
        String output = args.text("output");
        String group = args.text("group");
        int batch = args.number("batch", null);
        long deadline = args.deadline();
        long start = System.nanoTime();
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, group);
                KafkaProducer<String, String> producer = producer(bootstrap, args.text("transactional-id"), args.options.get("producer-settings"))) {
            producer.initTransactions();
            List<TopicPartition> parts = partitions(consumer, input);
            consumer.assign(parts);
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.copyOf(parts));
            for (TopicPartition tp : parts) {
                OffsetAndMetadata at = committed.get(tp);
                if (at == null) {
                    consumer.seekToBeginning(List.of(tp));
                } else {
                    consumer.seek(tp, at.offset());
                }
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(parts);
            long loopStart = System.nanoTime();
            ArrayDeque<ConsumerRecord<String, String>> pending = new ArrayDeque<>();
            List<Long> txnNanos = new ArrayList<>();
            long piped = 0;
            while (true) {
                while (pending.size() < batch && !consumedAll(consumer, end)) {
                    checkDeadline(deadline, "piping " + input + " to " + output);
                    consumer.poll(Duration.ofMillis(100)).forEach(pending::add);
                }
                if (pending.isEmpty()) {
                    break;
                }
                long t0 = System.nanoTime();
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (int i = 0; i < batch && !pending.isEmpty(); i++) {
                    ConsumerRecord<String, String> r = pending.poll();
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value() + ":piped"));
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    piped++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                txnNanos.add(System.nanoTime() - t0);
            }
            long loopEnd = System.nanoTime();
            report(batch, piped, txnNanos, loopStart - start, loopEnd - loopStart);
        }
    }

    /** Whether the consumer's position has reached the end offset in every partition. */
    static boolean consumedAll(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static void report(int batch, long piped, List<Long> txnNanos, long setupNanos, long loopNanos) {
        long[] sorted = txnNanos.stream().mapToLong(Long::longValue).sorted().toArray();
        double loopS = loopNanos / 1e9;
        System.out.printf(java.util.Locale.ROOT,
                "{\"client\":\"java\",\"batch\":%d,\"records\":%d,\"transactions\":%d,"
                        + "\"setup_ms\":%.1f,\"loop_ms\":%.1f,\"records_per_s\":%.0f,"
                        + "\"txn_p50_ms\":%.2f,\"txn_p99_ms\":%.2f}%n",
                batch, piped, sorted.length, setupNanos / 1e6, loopNanos / 1e6,
                loopS > 0 ? piped / loopS : 0.0, quantile(sorted, 0.50) / 1e6, quantile(sorted, 0.99) / 1e6);
    }

    /** The q-quantile (nearest rank) of sorted values; 0 when there are none. */
    static long quantile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    static void check(Args args) {
        String output = args.text("output");
        int records = args.number("records", null);
        int count = args.number("partitions", null);
        long deadline = args.deadline();
        try (KafkaConsumer<String, String> consumer = consumer(args.text("bootstrap"), null)) {
            List<TopicPartition> parts = partitions(consumer, output);
            if (parts.size() != count) {
                throw new Failure(1, output + " has " + parts.size() + " partitions, not " + count);
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> end = consumer.endOffsets(parts);
            Map<Integer, Integer> expected = new HashMap<>();
            for (TopicPartition tp : parts) {
                expected.put(tp.partition(), tp.partition());
            }
            long seen = 0;
            while (!parts.stream().allMatch(tp -> consumer.position(tp) >= end.get(tp))) {
                checkDeadline(deadline, "reading " + output);
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    int want = expected.get(r.partition());
                    String key = Integer.toString(want);
                    if (want >= records || !key.equals(r.key()) || !(key + ":piped").equals(r.value())) {
                        throw new Failure(1, String.format("%s-%d offset %d holds key %s value %s; expected %s",
                                output, r.partition(), r.offset(), r.key(), r.value(),
                                want >= records ? "no record" : "key " + key + " value " + key + ":piped"));
                    }
                    expected.put(r.partition(), want + count);
                    seen++;
                }
            }
            for (Map.Entry<Integer, Integer> e : expected.entrySet()) {
                if (e.getValue() < records) {
                    throw new Failure(1, String.format("%s-%d ends before input %d", output, e.getKey(), e.getValue()));
                }
            }
            System.out.printf("{\"checked\":%d,\"exactly_once_in_order\":true}%n", seen);
        }
    }
}
