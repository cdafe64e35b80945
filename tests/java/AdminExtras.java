// Java AdminClient (3.9.1) calls of the admin APIs tools use beyond topics and configs, for
// tests/clients/test_java_admin_extras.py. Prints one JSON line per step on stdout.
//
//   AdminExtras BOOTSTRAP TOPIC CONSUMER_GROUP
//
// TOPIC must exist with 5 partitions and records from an idempotent producer on partition 0; CONSUMER_GROUP
// must be a live KIP-848 consumer group.

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

public final class AdminExtras {
    private AdminExtras() {}

    static String jstr(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String errorOf(KafkaFuture<?> f) {
        try {
            f.get();
            return "null";
        } catch (Exception e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            return jstr(cause.getClass().getSimpleName());
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            int node = admin.describeCluster().controller().get().id();
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);

            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get();
            StringBuilder sb = new StringBuilder("{\"step\":\"log_dirs\",\"dirs\":[");
            boolean first = true;
            for (Map.Entry<String, LogDirDescription> e : dirs.get(node).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                LogDirDescription d = e.getValue();
                sb.append("{\"path\":").append(jstr(e.getKey())).append(",\"error\":")
                  .append(d.error() == null ? "null" : jstr(d.error().getClass().getSimpleName()))
                  .append(",\"total\":").append(d.totalBytes().orElse(-1)).append(",\"usable\":")
                  .append(d.usableBytes().orElse(-1)).append(",\"replicas\":{");
                boolean f2 = true;
                for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                    if (!r.getKey().topic().equals(topic)) continue;
                    if (!f2) sb.append(',');
                    f2 = false;
                    sb.append("\"").append(r.getKey().partition()).append("\":[").append(r.getValue().size())
                      .append(',').append(r.getValue().offsetLag()).append(',').append(r.getValue().isFuture()).append(']');
                }
                sb.append("}}");
            }
            System.out.println(sb.append("]}"));

            List<ProducerState> producers = admin.describeProducers(List.of(p0)).partitionResult(p0).get().activeProducers();
            sb = new StringBuilder("{\"step\":\"producers\",\"producers\":[");
            first = true;
            for (ProducerState ps : producers) {
                if (!first) sb.append(',');
                first = false;
                sb.append("{\"id\":").append(ps.producerId()).append(",\"epoch\":").append(ps.producerEpoch())
                  .append(",\"last_sequence\":").append(ps.lastSequence()).append(",\"last_timestamp\":")
                  .append(ps.lastTimestamp()).append(",\"txn_start\":")
                  .append(ps.currentTransactionStartOffset().isPresent() ? ps.currentTransactionStartOffset().getAsLong() : -1)
                  .append('}');
            }
            System.out.println(sb.append("]}"));

            Map<TopicPartition, PartitionReassignment> ongoing = admin.listPartitionReassignments().reassignments().get();
            System.out.println("{\"step\":\"list_reassignments\",\"count\":" + ongoing.size() + "}");

            Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
            moves.put(p0, Optional.of(new NewPartitionReassignment(List.of(node))));
            moves.put(p1, Optional.of(new NewPartitionReassignment(List.of(node + 1))));
            Map<TopicPartition, KafkaFuture<Void>> altered = admin.alterPartitionReassignments(moves).values();
            System.out.println("{\"step\":\"alter_reassignments\",\"p0\":" + errorOf(altered.get(p0)) + ",\"p1\":"
                    + errorOf(altered.get(p1)) + "}");

            Map<TopicPartition, Optional<Throwable>> elected =
                    admin.electLeaders(ElectionType.PREFERRED, Set.of(p0, p1)).partitions().get();
            System.out.println("{\"step\":\"elect\",\"p0\":" + jstr(elected.get(p0).map(t -> t.getClass().getSimpleName()).orElse(null))
                    + ",\"p1\":" + jstr(elected.get(p1).map(t -> t.getClass().getSimpleName()).orElse(null)) + "}");
            Map<TopicPartition, Optional<Throwable>> all = admin.electLeaders(ElectionType.PREFERRED, null).partitions().get();
            System.out.println("{\"step\":\"elect_all\",\"count\":" + all.size() + "}");

            // a partition limit of 2 makes the admin page through DescribeTopicPartitions with cursors
            TopicDescription desc = admin.describeTopics(List.of(topic), new DescribeTopicsOptions()
                    .partitionSizeLimitPerResponse(2)).allTopicNames().get().get(topic);
            sb = new StringBuilder("{\"step\":\"describe_topic\",\"id\":" + jstr(desc.topicId().toString())
                    + ",\"internal\":" + desc.isInternal() + ",\"partitions\":[");
            first = true;
            for (TopicPartitionInfo info : desc.partitions()) {
                if (!first) sb.append(',');
                first = false;
                sb.append("[").append(info.partition()).append(',').append(info.leader().id()).append(',')
                  .append(info.replicas().size()).append(',').append(info.isr().size()).append(']');
            }
            System.out.println(sb.append("]}"));

            ConsumerGroupDescription cg = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            sb = new StringBuilder("{\"step\":\"consumer_group\",\"type\":" + jstr(String.valueOf(cg.type()))
                    + ",\"state\":" + jstr(String.valueOf(cg.state())) + ",\"assignor\":" + jstr(cg.partitionAssignor())
                    + ",\"members\":[");
            first = true;
            for (MemberDescription m : cg.members()) {
                if (!first) sb.append(',');
                first = false;
                List<Integer> ps = new ArrayList<>();
                for (TopicPartition tp : m.assignment().topicPartitions()) ps.add(tp.partition());
                ps.sort(null);
                sb.append("{\"id\":").append(jstr(m.consumerId())).append(",\"partitions\":").append(ps).append('}');
            }
            System.out.println(sb.append("]}"));
        }
    }
}
