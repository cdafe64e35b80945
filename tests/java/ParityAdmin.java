// Java AdminClient (3.9.1) driver for the Kafka 4.3 parity tests (tests/clients/test_java_parity.py).
// Subcommands print JSON lines on stdout; the Python tests parse and check them.
//
//   features BOOTSTRAP          describeFeatures, updateFeatures (validate only), describeMetadataQuorum
//   quotas   BOOTSTRAP          alterClientQuotas (validate only, then for real) and describeClientQuotas
//   offsets  BOOTSTRAP TOPIC    listOffsets with earliestLocal / latestTiered (ListOffsets v8 / v9)

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public final class ParityAdmin {
    private ParityAdmin() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            switch (args[0]) {
                case "features" -> features(admin);
                case "quotas" -> quotas(admin);
                case "offsets" -> offsets(admin, args[2]);
                default -> {
                    System.err.println("usage: ParityAdmin features|quotas|offsets BOOTSTRAP ...");
                    System.exit(2);
                }
            }
        }
    }

    static String error(Exception e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        return "{\"class\":" + jstr(cause.getClass().getSimpleName()) + ",\"message\":" + jstr(cause.getMessage())
                + "}";
    }

    static void features(Admin admin) throws Exception {
        FeatureMetadata meta = admin.describeFeatures().featureMetadata().get();
        StringBuilder sb = new StringBuilder("{\"step\":\"describe_features\",\"supported\":{");
        boolean first = true;
        for (Map.Entry<String, SupportedVersionRange> e : meta.supportedFeatures().entrySet()) {
            sb.append(first ? "" : ",").append(jstr(e.getKey())).append(":[").append(e.getValue().minVersion())
              .append(',').append(e.getValue().maxVersion()).append(']');
            first = false;
        }
        sb.append("},\"finalized\":{");
        first = true;
        for (Map.Entry<String, FinalizedVersionRange> e : meta.finalizedFeatures().entrySet()) {
            sb.append(first ? "" : ",").append(jstr(e.getKey())).append(":[")
              .append(e.getValue().minVersionLevel()).append(',').append(e.getValue().maxVersionLevel()).append(']');
            first = false;
        }
        sb.append("},\"epoch\":").append(meta.finalizedFeaturesEpoch().orElse(-1L)).append('}');
        System.out.println(sb);

        String outcome;
        try {
            admin.updateFeatures(Map.of("metadata.version",
                    new FeatureUpdate((short) 31, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions().validateOnly(true)).all().get();
            outcome = "null";
        } catch (Exception e) {
            outcome = error(e);
        }
        System.out.println("{\"step\":\"update_too_new\",\"error\":" + outcome + "}");
        try {
            admin.updateFeatures(Map.of("metadata.version",
                    new FeatureUpdate((short) 30, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get();
            outcome = "null";
        } catch (Exception e) {
            outcome = error(e);
        }
        System.out.println("{\"step\":\"update_same\",\"error\":" + outcome + "}");

        QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
        sb = new StringBuilder("{\"step\":\"quorum\",\"leader_id\":" + q.leaderId() + ",\"leader_epoch\":"
                + q.leaderEpoch() + ",\"high_watermark\":" + q.highWatermark() + ",\"voters\":[");
        first = true;
        for (QuorumInfo.ReplicaState r : q.voters()) {
            sb.append(first ? "" : ",").append("{\"id\":").append(r.replicaId()).append(",\"leo\":")
              .append(r.logEndOffset()).append(",\"last_fetch\":").append(r.lastFetchTimestamp().orElse(-1L))
              .append(",\"last_caught_up\":").append(r.lastCaughtUpTimestamp().orElse(-1L))
              .append(",\"directory\":").append(jstr(r.replicaDirectoryId().toString())).append('}');
            first = false;
        }
        sb.append("],\"observers\":").append(q.observers().size()).append(",\"nodes\":{");
        first = true;
        for (Map.Entry<Integer, QuorumInfo.Node> e : q.nodes().entrySet()) {
            sb.append(first ? "" : ",").append(jstr(e.getKey().toString())).append(':')
              .append(jstr(e.getValue().endpoints().toString()));
            first = false;
        }
        System.out.println(sb.append("}}"));
    }

    static void quotas(Admin admin) throws Exception {
        ClientQuotaEntity alice = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, "alice",
                ClientQuotaEntity.CLIENT_ID, "app"));
        ClientQuotaEntity defaultClient = new ClientQuotaEntity(java.util.Collections.singletonMap(
                ClientQuotaEntity.CLIENT_ID, null));
        List<ClientQuotaAlteration> ops = new ArrayList<>();
        ops.add(new ClientQuotaAlteration(alice, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))));
        ops.add(new ClientQuotaAlteration(defaultClient, List.of(
                new ClientQuotaAlteration.Op("request_percentage", 50.0))));
        admin.alterClientQuotas(ops, new AlterClientQuotasOptions().validateOnly(true)).all().get();
        System.out.println("{\"step\":\"after_validate_only\",\"quotas\":"
                + describeAll(admin) + "}");
        admin.alterClientQuotas(ops).all().get();
        System.out.println("{\"step\":\"after_alter\",\"quotas\":" + describeAll(admin) + "}");
        String exact = entities(admin.describeClientQuotas(ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"),
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, "app")))).entities().get());
        System.out.println("{\"step\":\"exact\",\"quotas\":" + exact + "}");
        String bad;
        try {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                    new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all().get();
            bad = "null";
        } catch (Exception e) {
            bad = error(e);
        }
        System.out.println("{\"step\":\"unknown_key\",\"error\":" + bad + "}");
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
        System.out.println("{\"step\":\"after_remove\",\"quotas\":" + describeAll(admin) + "}");
    }

    static String describeAll(Admin admin) throws Exception {
        return entities(admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get());
    }

    static String entities(Map<ClientQuotaEntity, Map<String, Double>> found) {
        // [[{"user":..,"client-id":..}, {"key": value}], ...] sorted for a stable comparison
        List<String> rows = new ArrayList<>();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
            StringBuilder sb = new StringBuilder("[{");
            boolean first = true;
            for (Map.Entry<String, String> part : new java.util.TreeMap<>(e.getKey().entries()).entrySet()) {
                sb.append(first ? "" : ",").append(jstr(part.getKey())).append(':').append(jstr(part.getValue()));
                first = false;
            }
            sb.append("},{");
            first = true;
            for (Map.Entry<String, Double> v : new java.util.TreeMap<>(e.getValue()).entrySet()) {
                sb.append(first ? "" : ",").append(jstr(v.getKey())).append(':').append(v.getValue());
                first = false;
            }
            rows.add(sb.append("}]").toString());
        }
        java.util.Collections.sort(rows);
        return "[" + String.join(",", rows) + "]";
    }

    static void offsets(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        StringBuilder sb = new StringBuilder("{\"step\":\"offsets\"");
        Map<String, OffsetSpec> specs = new java.util.LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("earliest_local", OffsetSpec.earliestLocal());
        specs.put("latest_tiered", OffsetSpec.latestTiered());
        specs.put("latest", OffsetSpec.latest());
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, e.getValue()))
                    .partitionResult(tp).get();
            sb.append(",\"").append(e.getKey()).append("\":[").append(info.offset()).append(',')
              .append(info.timestamp()).append(',').append(info.leaderEpoch().orElse(-1)).append(']');
        }
        System.out.println(sb.append('}'));
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
