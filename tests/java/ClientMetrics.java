import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ClientMetricsResourceListing;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** What kafka-client-metrics.sh does (a CLIENT_METRICS subscription, then the listing), then a producer with
 *  telemetry on (the default) producing for args[2] ms. Prints "resource NAME" and "instance ID" lines. */
public class ClientMetrics {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long runMs = Long.parseLong(args[2]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(props)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, "java-producers");
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("interval.ms", "1000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("match", "client_id=java-.*"), AlterConfigOp.OpType.SET)));
            admin.incrementalAlterConfigs(ops).all().get();
            for (ClientMetricsResourceListing listing : admin.listClientMetricsResources().all().get()) {
                System.out.println("resource " + listing.name());
            }
        }
        props.put("client.id", "java-telemetry");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long end = System.currentTimeMillis() + runMs;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, "v".getBytes())).get();
                Thread.sleep(100);
            }
            System.out.println("instance " + producer.clientInstanceId(Duration.ofSeconds(10)));
        }
    }
}
