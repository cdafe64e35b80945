// Transactions through the Apache Kafka Java client (3.9.1), used by tests/transactions/test_java.py.
// Subcommands print JSON lines on stdout; the Python tests parse and check them.
//
//   txn   BOOTSTRAP TOPIC TXN_ID OUTCOMES          OUTCOMES like "CACA": one transaction per letter, C commit,
//                                                  A abort; 30 records each ("j-<t>-<i>" to partition i % 3)
//   ctp   BOOTSTRAP IN OUT GROUP TXN_ID MAX COMMIT consume up to MAX records of IN (read_committed), write
//                                                  "out-<value>" to OUT and sendOffsetsToTransaction, then
//                                                  commit (COMMIT=true) or abort
//   fence BOOTSTRAP TOPIC TXN_ID                   a second producer with the same id fences the first
//   admin BOOTSTRAP TOPIC TXN_ID                   list/describe transactions and producers around an open txn
//   read  BOOTSTRAP TOPIC:START:FETCH_BYTES ...    per spec, a new consumer reads read_committed from offset
//                                                  START of partition 0 until its position reaches the end
//                                                  offset (the LSO); FETCH_BYTES > 0 sets fetch.max.bytes and
//                                                  max.partition.fetch.bytes. One {"spec": n, "o": offset,
//                                                  "v": value up to its first ':'} per record, then
//                                                  {"spec": n, "done": count, "position": p, "end": e}

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnClient {
    private TxnClient() {}

    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "txn" -> txn(args);
            case "ctp" -> ctp(args);
            case "fence" -> fence(args);
            case "admin" -> admin(args);
            case "read" -> read(args);
            default -> {
                System.err.println("usage: TxnClient txn|ctp|fence|admin|read ...");
                System.exit(2);
            }
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String quote(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return new KafkaProducer<>(props);
    }

    static void sendAll(KafkaProducer<byte[], byte[]> p, List<ProducerRecord<byte[], byte[]>> records) throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> r : records) {
            acks.add(p.send(r));
        }
        p.flush();
        for (Future<RecordMetadata> f : acks) {
            f.get();
        }
    }

    static List<ProducerRecord<byte[], byte[]>> batch(String topic, String tag, int t) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            out.add(new ProducerRecord<>(topic, i % 3, null, utf8(tag + "-" + t + "-" + i)));
        }
        return out;
    }

    static void read(String[] args) {
        for (int i = 2; i < args.length; i++) {
            String[] spec = args[i].split(":");
            readOne(i - 2, args[1], spec[0], Long.parseLong(spec[1]), Integer.parseInt(spec[2]));
        }
    }

    static void readOne(int spec, String bootstrap, String topic, long start, int fetchBytes) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        if (fetchBytes > 0) {
            props.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(fetchBytes));
            props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(fetchBytes));
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        int seen = 0;
        String tag = "{\"spec\": " + spec;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, start);
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            while (consumer.position(tp) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    String v = new String(r.value(), StandardCharsets.UTF_8);
                    int colon = v.indexOf(':');
                    String prefix = colon < 0 ? v : v.substring(0, colon);
                    System.out.println(tag + ", \"o\": " + r.offset() + ", \"v\": " + quote(prefix) + "}");
                    seen++;
                }
            }
            System.out.println(tag + ", \"done\": " + seen + ", \"position\": " + consumer.position(tp)
                + ", \"end\": " + end + "}");
        }
    }

    static void txn(String[] args) throws Exception {
        String outcomes = args[4];
        try (KafkaProducer<byte[], byte[]> p = producer(args[1], args[3])) {
            p.initTransactions();
            for (int t = 0; t < outcomes.length(); t++) {
                p.beginTransaction();
                sendAll(p, batch(args[2], "j", t));
                if (outcomes.charAt(t) == 'C') {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
            }
        }
        System.out.println("{\"done\": " + outcomes.length() + "}");
    }

    static void ctp(String[] args) throws Exception {
        String bootstrap = args[1];
        String in = args[2];
        String out = args[3];
        int max = Integer.parseInt(args[6]);
        boolean commit = Boolean.parseBoolean(args[7]);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, args[4]);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(max));
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        int processed = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> p = producer(bootstrap, args[5])) {
            p.initTransactions();
            c.subscribe(List.of(in));
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            p.beginTransaction();
            List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
                byte[] v = r.value();
                records.add(new ProducerRecord<>(out, r.partition(), null,
                        utf8("out-" + new String(v, StandardCharsets.UTF_8))));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                processed++;
            }
            sendAll(p, records);
            p.sendOffsetsToTransaction(offsets, c.groupMetadata());
            if (commit) {
                p.commitTransaction();
            } else {
                p.abortTransaction();
            }
        }
        System.out.println("{\"processed\": " + processed + "}");
    }

    static void fence(String[] args) throws Exception {
        String error = null;
        try (KafkaProducer<byte[], byte[]> old = producer(args[1], args[3])) {
            old.initTransactions();
            old.beginTransaction();
            sendAll(old, batch(args[2], "old", 0));
            try (KafkaProducer<byte[], byte[]> fresh = producer(args[1], args[3])) {
                fresh.initTransactions();
                try {
                    old.commitTransaction();
                } catch (Exception e) {
                    error = e.getClass().getSimpleName();
                }
                fresh.beginTransaction();
                sendAll(fresh, List.of(new ProducerRecord<>(args[2], 0, null, utf8("new"))));
                fresh.commitTransaction();
            }
        }
        System.out.println("{\"old_commit_error\": " + quote(error) + "}");
    }

    static String describe(Admin admin, String txnId) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
        List<String> tps = new ArrayList<>();
        for (TopicPartition tp : d.topicPartitions()) {
            tps.add(quote(tp.toString()));
        }
        tps.sort(null);
        return "{\"state\": " + quote(d.state().toString()) + ", \"producer_id\": " + d.producerId()
                + ", \"epoch\": " + d.producerEpoch() + ", \"timeout_ms\": " + d.transactionTimeoutMs()
                + ", \"started\": " + d.transactionStartTimeMs().isPresent() + ", \"partitions\": " + tps + "}";
    }

    static void admin(String[] args) throws Exception {
        String topic = args[2];
        String txnId = args[3];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        try (Admin admin = Admin.create(ap);
             KafkaProducer<byte[], byte[]> p = producer(args[1], txnId)) {
            p.initTransactions();
            p.beginTransaction();
            sendAll(p, List.of(new ProducerRecord<>(topic, 0, null, utf8("a")),
                    new ProducerRecord<>(topic, 1, null, utf8("b"))));
            Collection<TransactionListing> listings = admin.listTransactions().all().get();
            List<String> listed = new ArrayList<>();
            for (TransactionListing l : listings) {
                listed.add("[" + quote(l.transactionalId()) + ", " + l.producerId() + ", " + quote(l.state().toString()) + "]");
            }
            System.out.println("{\"listed\": " + listed + "}");
            System.out.println("{\"open\": " + describe(admin, txnId) + "}");
            TopicPartition tp0 = new TopicPartition(topic, 0);
            List<ProducerState> producers = admin.describeProducers(List.of(tp0)).partitionResult(tp0).get().activeProducers();
            List<String> ps = new ArrayList<>();
            for (ProducerState s : producers) {
                ps.add("[" + s.producerId() + ", " + s.producerEpoch() + ", " + s.lastSequence() + ", "
                        + s.currentTransactionStartOffset().orElse(-1L) + "]");
            }
            System.out.println("{\"producers\": " + ps + "}");
            p.commitTransaction();
            System.out.println("{\"committed\": " + describe(admin, txnId) + "}");
        }
    }
}
