package openshell.driver.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import org.junit.jupiter.api.Test;

/**
 * {@code deploy/kubernetes/} parsed as Kubernetes objects and checked against each other and against
 * the driver: the Deployment runs as the bound service account, the Role sits in the namespace the
 * driver is given, and every driver setting it passes is one the driver accepts. Parsing only: no
 * cluster has applied these manifests (none can run here).
 */
class DeployManifestsTest {
    private static final Path DEPLOY = Path.of("../../deploy/kubernetes");

    private static List<HasMetadata> load(String file) throws IOException {
        try (KubernetesClient offline = new KubernetesClientBuilder().build();
             InputStream in = Files.newInputStream(DEPLOY.resolve(file))) {
            return offline.load(in).items();
        }
    }

    @Test
    void theGatewayRunsAsTheBoundAccountWithSettingsTheDriverAccepts() throws IOException {
        ServiceAccount account = (ServiceAccount) load("serviceaccount.yaml").getFirst();
        Role role = (Role) load("role.yaml").getFirst();
        RoleBinding binding = (RoleBinding) load("rolebinding.yaml").getFirst();
        List<HasMetadata> gateway = load("gateway.yaml");
        Deployment deployment = (Deployment) gateway.stream().filter(o -> o instanceof Deployment).findFirst().orElseThrow();

        var pod = deployment.getSpec().getTemplate().getSpec();
        assertEquals(account.getMetadata().getName(), pod.getServiceAccountName());
        assertEquals(account.getMetadata().getNamespace(), deployment.getMetadata().getNamespace());
        assertEquals(role.getMetadata().getName(), binding.getRoleRef().getName());
        assertEquals("Role", binding.getRoleRef().getKind());
        assertEquals(role.getMetadata().getNamespace(), binding.getMetadata().getNamespace());
        assertEquals(1, binding.getSubjects().size());
        assertEquals(account.getMetadata().getName(), binding.getSubjects().getFirst().getName());
        assertEquals(account.getMetadata().getNamespace(), binding.getSubjects().getFirst().getNamespace());

        List<String> args = pod.getContainers().getFirst().getArgs();
        assertEquals("kubernetes", args.get(args.indexOf("--driver") + 1));
        Map<String, String> settings = new LinkedHashMap<>();
        for (int i = 0; i < args.size(); i++) {
            if (args.get(i).equals("--driver-setting")) {
                String kv = args.get(i + 1);
                settings.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        KubernetesSettings parsed = KubernetesSettings.parse(settings);
        assertEquals(role.getMetadata().getNamespace(), parsed.namespace(), "the Role is where the sandboxes are");
        assertFalse(parsed.networkPolicyEnforced(), "shipped unfenced until the operator checked the CNI");
        assertTrue(args.contains("--database-url"), "PostgreSQL is the store");
        List<String> secretsInArgs = new ArrayList<>(args.stream().filter(a -> a.toLowerCase().contains("password")).toList());
        assertEquals(List.of(), secretsInArgs, "no password on the command line");
        assertEquals("openshell-database", pod.getContainers().getFirst().getEnv().stream()
                .filter(e -> e.getName().equals("OPENSHELL_DATABASE_PASSWORD")).findFirst().orElseThrow()
                .getValueFrom().getSecretKeyRef().getName());
        assertEquals(List.of("ALL"), pod.getContainers().getFirst().getSecurityContext().getCapabilities().getDrop());
        assertEquals(Boolean.TRUE, pod.getSecurityContext().getRunAsNonRoot());
    }
}
