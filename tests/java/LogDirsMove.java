// Java AdminClient (3.9.1) alterReplicaLogDirs + describeLogDirs/describeReplicaLogDirs, for
// tests/clients/test_java_admin_extras.py. Prints one JSON line per step on stdout.
//
//   LogDirsMove BOOTSTRAP TOPIC TARGET_DIR UNKNOWN_DIR
//
// Moves TOPIC's partition 0 to TARGET_DIR and waits until it is there with no future replica; asks to move
// partition 1 to UNKNOWN_DIR (not a log dir of the broker).

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

public final class LogDirsMove {
    private LogDirsMove() {}

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

    // {"dir": [["topic-p", size, isFuture], ...], ...} for TOPIC's replicas
    static String logDirs(Admin admin, int node, String topic) throws Exception {
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(Set.of(node)).allDescriptions().get().get(node);
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, LogDirDescription> d : dirs.entrySet()) {
            List<String> reps = new ArrayList<>();
            for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                if (!r.getKey().topic().equals(topic)) continue;
                reps.add("[" + jstr(r.getKey().toString()) + "," + r.getValue().size() + ","
                        + r.getValue().isFuture() + "]");
            }
            out.add(jstr(d.getKey()) + ":[" + String.join(",", reps) + "]");
        }
        return "{" + String.join(",", out) + "}";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String target = args[2];
        String unknown = args[3];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            int node = admin.describeCluster().controller().get().id();
            TopicPartitionReplica r0 = new TopicPartitionReplica(topic, 0, node);
            TopicPartitionReplica r1 = new TopicPartitionReplica(topic, 1, node);
            System.out.println("{\"step\":\"before\",\"dirs\":" + logDirs(admin, node, topic) + "}");
            Map<TopicPartitionReplica, KafkaFuture<Void>> altered =
                    admin.alterReplicaLogDirs(Map.of(r0, target, r1, unknown)).values();
            System.out.println("{\"step\":\"alter\",\"p0\":" + errorOf(altered.get(r0)) + ",\"p1\":"
                    + errorOf(altered.get(r1)) + "}");
            boolean sawFuture = false;
            ReplicaLogDirInfo info = null;
            long deadline = System.currentTimeMillis() + 120_000;
            while (System.currentTimeMillis() < deadline) {
                info = admin.describeReplicaLogDirs(List.of(r0)).values().get(r0).get();
                if (info.getFutureReplicaLogDir() != null) sawFuture = true;
                if (target.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) break;
                Thread.sleep(50);
            }
            System.out.println("{\"step\":\"replica\",\"current\":" + jstr(info.getCurrentReplicaLogDir())
                    + ",\"future\":" + jstr(info.getFutureReplicaLogDir()) + ",\"saw_future\":" + sawFuture + "}");
            System.out.println("{\"step\":\"after\",\"dirs\":" + logDirs(admin, node, topic) + "}");
        }
    }
}
