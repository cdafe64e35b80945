import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** CreateTopics, DescribeConfigs, OffsetCommit and JoinGroup, each twice on one client: the test makes the
 *  broker's handler fail the first time. Prints "STEP first CLASS: MESSAGE" and "STEP second ok|CLASS". */
public class HandlerErrors {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("retries", "0");
        try (Admin admin = Admin.create(props)) {
            twice("create_topics", () -> {
                admin.createTopics(List.of(new NewTopic(topic + "-new", 1, (short) 1))).all().get();
            });
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            twice("describe_configs", () -> {
                admin.describeConfigs(List.of(resource)).all().get();
            });
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", "handler-errors");
        c.put("group.protocol", "classic");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            twice("offset_commit", () -> consumer.commitSync(Map.of(tp, new OffsetAndMetadata(0))));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            twice("join_group", () -> {
                long end = System.currentTimeMillis() + 30_000;
                while (consumer.assignment().isEmpty() && System.currentTimeMillis() < end) {
                    consumer.poll(Duration.ofMillis(200));
                }
                if (consumer.assignment().isEmpty()) throw new IllegalStateException("no assignment");
            });
        }
    }

    interface Step { void run() throws Exception; }

    static void twice(String name, Step step) {
        System.out.println(name + " first " + outcome(step));
        System.out.println(name + " second " + outcome(step));
    }

    static String outcome(Step step) {
        try {
            step.run();
            return "ok";
        } catch (Exception e) {
            Throwable cause = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null
                ? e.getCause() : e;
            return cause.getClass().getSimpleName() + ": " + cause.getMessage();
        }
    }
}
