// Consumer-group and idempotent-producer driver for the Apache Kafka Java client (3.9.1), used by
// tests/groups/test_java_groups.py. Every subcommand prints JSON lines on stdout (flushed per line).
//
//   produce  BOOTSTRAP TOPIC PARTITIONS FROM COUNT           default producer settings (idempotence on)
//   consume  BOOTSTRAP TOPIC GROUP COUNT                     subscribe, process exactly COUNT records,
//                                                            commit exactly those, close (LeaveGroup)
//   member   BOOTSTRAP TOPIC GROUP SECONDS [prop=value ...]  subscribe and consume until SECONDS pass or
//                                                            "close" arrives on stdin; commitSync per poll
//                                                            (a CommitFailedException is reported as
//                                                            {"commit_failed": message} and polling goes on)
//   groups   BOOTSTRAP GROUP                                 AdminClient list + describe + committed offsets
//   delete   BOOTSTRAP GROUP                                 AdminClient deleteConsumerGroups
//
// Record i: key "k-i", value "v-i", partition i % PARTITIONS.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class GroupClient {
    private GroupClient() {}

    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "member" -> member(args);
            case "groups" -> groups(args);
            case "delete" -> delete(args);
            default -> {
                System.err.println("usage: GroupClient produce|consume|member|groups|delete ...");
                System.exit(2);
            }
        }
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void applyProps(Properties props, String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
    }

    static void produce(String[] args) throws Exception {
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int from = Integer.parseInt(args[4]);
        int count = Integer.parseInt(args[5]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        applyProps(props, args, 6);
        AtomicInteger acked = new AtomicInteger();
        AtomicReference<String> error = new AtomicReference<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = from; i < from + count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "k-" + i, "v-" + i), (md, err) -> {
                    if (err != null) {
                        error.compareAndSet(null, err.toString());
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        emit("{\"acked\":" + acked.get() + ",\"error\":" + jstr(error.get()) + "}");
        System.exit(error.get() == null ? 0 : 1);
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return props;
    }

    static String record(ConsumerRecord<String, String> r) {
        return "{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":" + jstr(r.value()) + "}";
    }

    static String partitions(Collection<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) {
            ps.add(tp.partition());
        }
        ps.sort(null);
        return ps.toString();
    }

    // Process exactly COUNT records, commit exactly their offsets, close.
    static void consume(String[] args) throws Exception {
        String topic = args[2];
        int count = Integer.parseInt(args[4]);
        Properties props = consumerProps(args[1], args[3]);
        applyProps(props, args, 5);
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        int seen = 0;
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            outer:
            while (seen < count && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : recs) {
                    emit(record(r));
                    commit.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, "java-meta-" + r.offset()));
                    if (++seen >= count) {
                        break outer;
                    }
                }
            }
            consumer.commitSync(commit);
            emit("{\"committed\":" + commit.size() + ",\"done\":" + seen + "}");
        }
    }

    // A long-running group member; "close" on stdin closes it cleanly (LeaveGroup), SIGKILL does not.
    static void member(String[] args) throws Exception {
        String topic = args[2];
        int seconds = Integer.parseInt(args[4]);
        Properties props = consumerProps(args[1], args[3]);
        applyProps(props, args, 5);
        AtomicBoolean closing = new AtomicBoolean();
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) {
                        break;
                    }
                }
            } catch (Exception e) {
                // stdin gone: treat as close
            }
            closing.set(true);
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();
        long deadline = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                emit("{\"revoked\":" + partitions(parts) + "}");
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                emit("{\"assigned\":" + partitions(consumer.assignment()) + "}");
            }
        });
        try {
            while (!closing.get() && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<String, String> r : recs) {
                    emit(record(r));
                }
                try {
                    consumer.commitSync();
                    emit("{\"commit\":" + recs.count() + "}");
                } catch (CommitFailedException e) {
                    // As applications do: the group moved on (a rebalance fenced this commit); the records
                    // are read again by whoever owns their partitions now, so carry on polling.
                    emit("{\"commit_failed\":" + jstr(e.getMessage()) + "}");
                }
            }
        } catch (WakeupException e) {
            // closing
        } finally {
            consumer.close();
            emit("{\"closed\":true}");
        }
    }

    static void groups(String[] args) throws Exception {
        String group = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        try (Admin admin = Admin.create(props)) {
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) {
                emit("{\"listed\":" + jstr(l.groupId()) + ",\"simple\":" + l.isSimpleConsumerGroup() + ",\"state\":"
                        + jstr(l.state().map(Object::toString).orElse(null)) + "}");
            }
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            StringBuilder sb = new StringBuilder("{\"group\":" + jstr(d.groupId()) + ",\"state\":"
                    + jstr(d.state().toString()) + ",\"assignor\":" + jstr(d.partitionAssignor())
                    + ",\"coordinator\":" + d.coordinator().id() + ",\"members\":[");
            boolean first = true;
            for (MemberDescription m : d.members()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append("{\"id\":").append(jstr(m.consumerId())).append(",\"client\":").append(jstr(m.clientId()))
                  .append(",\"host\":").append(jstr(m.host())).append(",\"partitions\":")
                  .append(partitions(m.assignment().topicPartitions())).append('}');
            }
            emit(sb.append("]}").toString());
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                emit("{\"offset_topic\":" + jstr(e.getKey().topic()) + ",\"p\":" + e.getKey().partition()
                        + ",\"offset\":" + e.getValue().offset() + ",\"metadata\":" + jstr(e.getValue().metadata())
                        + "}");
            }
        }
    }

    static void delete(String[] args) throws Exception {
        String group = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        try (Admin admin = Admin.create(props)) {
            try {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                emit("{\"deleted\":" + jstr(group) + "}");
            } catch (ExecutionException e) {
                emit("{\"error\":" + jstr(e.getCause().getClass().getSimpleName()) + "}");
            }
        }
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
