// Java AdminClient (3.9.1) driver for the controller mutation quota tests (tests/clients/test_java_mutation_quota.py).
// Prints JSON lines on stdout; the Python test parses and checks them.
//
//   strict BOOTSTRAP CLIENT_ID PREFIX   step "strict": createTopics PREFIX-a (1 partition), -b (2), -c (1) in one
//                                       call with retryOnQuotaViolation(false): per-topic outcome, throttle time;
//                                       then step "retry": PREFIX-d, -e, -f, -g (1 each) with the default options (the
//                                       client retries a THROTTLING_QUOTA_EXCEEDED topic after its throttle time)
//   many   BOOTSTRAP CLIENT_ID PREFIX N createTopics PREFIX-0..N-1 (3 partitions each) in one call, no retry

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;

public final class MutationQuotaAdmin {
    private MutationQuotaAdmin() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            switch (args[0]) {
                case "strict" -> {
                    create(admin, "strict", List.of(new NewTopic(args[3] + "-a", 1, (short) 1),
                            new NewTopic(args[3] + "-b", 2, (short) 1),
                            new NewTopic(args[3] + "-c", 1, (short) 1)), false);
                    create(admin, "retry", List.of(new NewTopic(args[3] + "-d", 1, (short) 1),
                            new NewTopic(args[3] + "-e", 1, (short) 1),
                            new NewTopic(args[3] + "-f", 1, (short) 1),
                            new NewTopic(args[3] + "-g", 1, (short) 1)), true);
                }
                case "many" -> {
                    List<NewTopic> topics = new ArrayList<>();
                    for (int i = 0; i < Integer.parseInt(args[4]); i++) {
                        topics.add(new NewTopic(args[3] + "-" + i, 3, (short) 1));
                    }
                    create(admin, "many", topics, false);
                }
                default -> {
                    System.err.println("usage: MutationQuotaAdmin strict|many BOOTSTRAP CLIENT_ID ...");
                    System.exit(2);
                }
            }
        }
    }

    static void create(Admin admin, String step, List<NewTopic> topics, boolean retry) throws Exception {
        CreateTopicsOptions options = new CreateTopicsOptions().retryOnQuotaViolation(retry);
        CreateTopicsResult result = admin.createTopics(topics, options);
        StringBuilder sb = new StringBuilder("{\"step\":" + jstr(step) + ",\"topics\":{");
        boolean first = true;
        for (Map.Entry<String, KafkaFuture<Void>> e : result.values().entrySet()) {
            sb.append(first ? "" : ",").append(jstr(e.getKey())).append(':');
            first = false;
            try {
                e.getValue().get();
                sb.append("{\"error\":null}");
            } catch (ExecutionException ex) {
                Throwable cause = ex.getCause();
                sb.append("{\"error\":").append(jstr(cause.getClass().getSimpleName()))
                        .append(",\"message\":").append(jstr(cause.getMessage()));
                if (cause instanceof ThrottlingQuotaExceededException t) {
                    sb.append(",\"throttle_time_ms\":").append(t.throttleTimeMs());
                }
                sb.append('}');
            }
        }
        System.out.println(sb.append("}}"));
    }

    static String jstr(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                default -> sb.append(c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
            }
        }
        return sb.append('"').toString();
    }
}
