// A small driver for the Apache Kafka Java client (3.9.1), used by tests/clients/test_java.py.
// Subcommands print JSON lines on stdout; the Python tests parse and check them.
//
//   produce BOOTSTRAP TOPIC COUNT PARTITIONS CODEC BASE_TS [prop=value ...]
//   consume BOOTSTRAP TOPIC COUNT PARTITIONS [prop=value ...]
//   admin   BOOTSTRAP TOPIC
//
// Records follow the formula in tests/clients/records.py (record i goes to partition i % PARTITIONS with
// key "key-<i>", a value derived from i, three headers and timestamp BASE_TS + i), so both sides can build
// the expected data without exchanging it.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TidelogClient {
    private TidelogClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "admin" -> admin(args);
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: TidelogClient produce|consume|admin ...");
        System.exit(2);
    }

    // ---- the shared record formula (mirrors tests/clients/records.py) ----

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static byte[] key(int i) {
        return utf8("key-" + i);
    }

    static byte[] value(int i) {
        // Repetitive text so the codecs really compress, with a length that varies per record.
        return utf8("value-" + i + "-" + "tide".repeat(i % 40) + "-end");
    }

    static List<Header> headers(int i, String codec) {
        List<Header> hs = new ArrayList<>();
        hs.add(new RecordHeader("index", utf8(Integer.toString(i))));
        hs.add(new RecordHeader("codec", utf8(codec)));
        hs.add(new RecordHeader("empty", new byte[0]));
        return hs;
    }

    // ---- produce ----

    static void applyProps(Properties props, String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
    }

    static void produce(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        int partitions = Integer.parseInt(args[4]);
        String codec = args[5];
        long baseTs = Long.parseLong(args[6]);

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "131072");
        // Idempotence (the Java default) is exercised by the idempotent-producer tests; here it is off so
        // this suite checks plain produce/fetch only.
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        applyProps(props, args, 7);

        AtomicInteger acked = new AtomicInteger();
        AtomicInteger misplaced = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                final int idx = i;
                int partition = i % partitions;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(
                        topic, partition, baseTs + i, key(i), value(i), headers(i, codec));
                producer.send(rec, (md, err) -> {
                    if (err != null) {
                        firstError.compareAndSet(null, err.toString());
                    } else {
                        acked.incrementAndGet();
                        if (md.partition() != idx % partitions || md.offset() != idx / partitions) {
                            misplaced.incrementAndGet();
                        }
                    }
                });
            }
            producer.flush();
        }
        System.out.println("{\"acked\":" + acked.get() + ",\"misplaced\":" + misplaced.get()
                + ",\"error\":" + jstr(firstError.get()) + "}");
        System.exit(firstError.get() == null ? 0 : 1);
    }

    // ---- consume ----

    static void consume(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        int partitions = Integer.parseInt(args[4]);

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        applyProps(props, args, 5);

        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        int seen = 0;
        StringBuilder out = new StringBuilder(256);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            while (seen < count && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    out.setLength(0);
                    out.append("{\"p\":").append(r.partition())
                       .append(",\"o\":").append(r.offset())
                       .append(",\"ts\":").append(r.timestamp())
                       .append(",\"tt\":").append(jstr(r.timestampType().name))
                       .append(",\"k\":").append(jstr(hex(r.key())))
                       .append(",\"v\":").append(jstr(hex(r.value())))
                       .append(",\"h\":[");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) {
                            out.append(',');
                        }
                        first = false;
                        out.append('[').append(jstr(h.key())).append(',').append(jstr(hex(h.value()))).append(']');
                    }
                    out.append("]}");
                    System.out.println(out);
                    seen++;
                }
            }
        }
        System.out.println("{\"done\":" + seen + "}");
    }

    // ---- admin ----

    static void admin(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        String step = "connect";
        try (Admin admin = Admin.create(props)) {
            step = "create";
            Map<String, String> configs = new HashMap<>();
            configs.put("cleanup.policy", "compact");
            configs.put("retention.ms", "3600000");
            configs.put("max.message.bytes", "2000000");
            CreateTopicsResult created = admin.createTopics(
                    List.of(new NewTopic(topic, 2, (short) 1).configs(configs)));
            created.all().get();
            System.out.println("{\"step\":\"create\",\"topic_id\":" + jstr(created.topicId(topic).get().toString())
                    + ",\"partitions\":" + created.numPartitions(topic).get()
                    + ",\"replication_factor\":" + created.replicationFactor(topic).get() + "}");

            step = "describe";
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            printConfigs("describe", describe(admin, res));

            step = "alter";
            Collection<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE));
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
            printConfigs("describe_after_alter", describe(admin, res));

            step = "list_offsets";
            long baseTs = System.currentTimeMillis() - 600_000L;
            produceForOffsets(bootstrap, topic, baseTs);
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            StringBuilder sb = new StringBuilder("{\"step\":\"list_offsets\",\"base_ts\":" + baseTs);
            Map<String, OffsetSpec> specs = new java.util.LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("for_ts", OffsetSpec.forTimestamp(baseTs + 10_500));
            specs.put("for_ts_past_end", OffsetSpec.forTimestamp(baseTs + 1_000_000));
            specs.put("max_ts", OffsetSpec.maxTimestamp());
            for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
                ListOffsetsResult r = admin.listOffsets(Map.of(p0, e.getValue(), p1, e.getValue()));
                ListOffsetsResult.ListOffsetsResultInfo i0 = r.partitionResult(p0).get();
                ListOffsetsResult.ListOffsetsResultInfo i1 = r.partitionResult(p1).get();
                sb.append(",\"").append(e.getKey()).append("\":[[").append(i0.offset()).append(',')
                  .append(i0.timestamp()).append("],[").append(i1.offset()).append(',').append(i1.timestamp())
                  .append("]]");
            }
            System.out.println(sb.append('}'));

            step = "create_partitions";
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            TopicDescription desc = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            System.out.println("{\"step\":\"create_partitions\",\"partitions\":" + desc.partitions().size()
                    + ",\"topic_id\":" + jstr(desc.topicId().toString()) + "}");

            step = "delete";
            admin.deleteTopics(List.of(topic)).all().get();
            Set<String> names = admin.listTopics().names().get();
            System.out.println("{\"step\":\"delete\",\"still_listed\":" + names.contains(topic) + "}");
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.out.println("{\"step\":" + jstr(step) + ",\"error\":" + jstr(cause.toString()) + "}");
            System.exit(1);
        }
    }

    static Config describe(Admin admin, ConfigResource res) throws Exception {
        return admin.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(true))
                .all().get().get(res);
    }

    static void printConfigs(String step, Config config) {
        StringBuilder sb = new StringBuilder("{\"step\":" + jstr(step) + ",\"configs\":{");
        boolean first = true;
        for (ConfigEntry e : config.entries()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append(jstr(e.name())).append(":{\"value\":").append(jstr(e.value()))
              .append(",\"source\":").append(jstr(e.source().name()))
              .append(",\"default\":").append(e.isDefault())
              .append(",\"read_only\":").append(e.isReadOnly())
              .append(",\"sensitive\":").append(e.isSensitive())
              .append(",\"synonyms\":[");
            boolean firstSyn = true;
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                if (!firstSyn) {
                    sb.append(',');
                }
                firstSyn = false;
                sb.append('[').append(jstr(s.name())).append(',').append(jstr(s.value())).append(',')
                  .append(jstr(s.source().name())).append(']');
            }
            sb.append("]}");
        }
        System.out.println(sb.append("}}"));
    }

    /** 30 records into partition 0 with timestamps baseTs + i * 1000; partition 1 stays empty. */
    static void produceForOffsets(String bootstrap, String topic, long baseTs) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < 30; i++) {
                // Keys are unique: the topic is compacted, and nothing may be cleaned away.
                producer.send(new ProducerRecord<>(topic, 0, baseTs + i * 1000L, key(i), value(i))).get();
            }
        }
    }

    // ---- tiny JSON helpers (no JSON library on the test classpath) ----

    static String hex(byte[] b) {
        if (b == null) {
            return null;
        }
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
        }
        return sb.toString();
    }

    static String jstr(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }
}
