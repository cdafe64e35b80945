// Java AdminClient driver for the security suite: ACLs and SCRAM users. Prints one JSON object per line.
//   java SecurityAdmin create|delete|denied BOOTSTRAP [key=value ...]
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class SecurityAdmin {
    static final AclBindingFilter JIM = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter("User:jim", null, AclOperation.ANY, AclPermissionType.ANY));

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[1]);
        props.put("request.timeout.ms", "30000");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        try (Admin admin = Admin.create(props)) {
            switch (args[0]) {
                case "create" -> create(admin);
                case "delete" -> delete(admin);
                case "denied" -> denied(admin);
                default -> throw new IllegalArgumentException(args[0]);
            }
        }
    }

    static void create(Admin admin) throws Exception {
        AclBinding topic = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-sec-", PatternType.PREFIXED),
                new AccessControlEntry("User:jim", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
        AclBinding group = new AclBinding(new ResourcePattern(ResourceType.GROUP, "java-group", PatternType.LITERAL),
                new AccessControlEntry("User:jim", "*", AclOperation.READ, AclPermissionType.ALLOW));
        admin.createAcls(List.of(topic, group)).all().get();
        Collection<AclBinding> all = admin.describeAcls(JIM).values().get();
        Collection<AclBinding> match = admin.describeAcls(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "java-sec-orders", PatternType.MATCH),
                AccessControlEntryFilter.ANY)).values().get();
        System.out.println("{\"acls\":" + all.size() + ",\"matching_topic\":" + match.size() + "}");
        admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                "jim", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "jim-pw"))).all().get();
        Map<String, UserScramCredentialsDescription> users = admin.describeUserScramCredentials(List.of("jim")).all().get();
        ScramCredentialInfo info = users.get("jim").credentialInfos().get(0);
        System.out.println("{\"user\":\"jim\",\"mechanism\":\"" + info.mechanism() + "\",\"iterations\":"
                + info.iterations() + "}");
    }

    static void delete(Admin admin) throws Exception {
        Collection<AclBinding> deleted = admin.deleteAcls(List.of(JIM)).all().get();
        admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("jim", ScramMechanism.SCRAM_SHA_512)))
                .all().get();
        boolean present = admin.describeUserScramCredentials().all().get().containsKey("jim");
        System.out.println("{\"deleted\":" + deleted.size() + ",\"user_present\":" + present + "}");
    }

    static void denied(Admin admin) throws Exception {
        String acl;
        String users;
        try {
            admin.describeAcls(AclBindingFilter.ANY).values().get();
            acl = "none";
        } catch (ExecutionException e) {
            acl = e.getCause().getClass().getSimpleName();
        }
        try {
            admin.describeUserScramCredentials().all().get();
            users = "none";
        } catch (ExecutionException e) {
            users = e.getCause().getClass().getSimpleName();
        }
        System.out.println("{\"describe_acls\":\"" + acl + "\",\"describe_users\":\"" + users + "\"}");
    }
}
