package openshell.driver.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Collectors;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.StatusBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.utils.Serialization;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchMaterial;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The driver against fabric8's mock API server in CRUD mode, on loopback, with the test playing the
 * cluster's controllers ({@link MockCluster}: ClusterIPs, and Pods run only once ungated).
 *
 * <p>What the mock does not exercise, so these tests cannot show it: NetworkPolicy enforcement (no
 * CNI: the policies are asserted as objects, never as packets dropped); scheduling gates (the mock
 * schedules nothing; the test's controller honours them and records a Pod run while gated); Secret
 * immutability (the mock accepts updates: the tests assert the field and that the driver never issues
 * PUT or PATCH on a Secret); owner-reference garbage collection, admission defaults and webhooks,
 * Pod Security admission, TokenReview, RBAC enforcement (a Role is compared with the requests the
 * driver made; 403 answers are injected), real ClusterIP allocation and kube-proxy, and the Pods
 * actually running the sandbox runtime and supervisor images.
 */
@org.junit.jupiter.api.Timeout(60)
class KubernetesDriverTest {
    private static final byte[] SUPERVISOR_BUNDLE = "supervisor-secret-bundle".getBytes(StandardCharsets.UTF_8);
    private static final byte[] RUNTIME_BUNDLE = "runtime-secret-bundle".getBytes(StandardCharsets.UTF_8);

    private MockCluster cluster;
    private KubernetesDriver driver;

    @BeforeEach
    void start() {
        cluster = new MockCluster();
        driver = cluster.driver();
    }

    @AfterEach
    void stop() {
        driver.close();
        cluster.close();
    }

    static LaunchPlan plan(String id, long generation, Map<String, String> options) {
        return new LaunchPlan(new SandboxContext(new SandboxId(id), SandboxSessionId.fresh(),
                PolicySnapshot.of(1, "version: 1\n".getBytes(StandardCharsets.UTF_8)), AgentSpec.of(List.of("/bin/true")),
                WorkloadIdentity.of(1000, 1001)), generation, LaunchMaterial.of(SUPERVISOR_BUNDLE, RUNTIME_BUNDLE), options);
    }

    static LaunchPlan plan(String id, long generation) {
        return plan(id, generation, Map.of());
    }

    private KubernetesClient k() {
        return cluster.admin;
    }

    private Pod pod(String name) {
        return k().pods().inNamespace(MockCluster.NAMESPACE).withName(name).get();
    }

    private Service service(String name) {
        return k().services().inNamespace(MockCluster.NAMESPACE).withName(name).get();
    }

    private NetworkPolicy policy(String name) {
        return k().network().v1().networkPolicies().inNamespace(MockCluster.NAMESPACE).withName(name).get();
    }

    /** Every object of the namespace labelled as this project's, as kind/name. */
    private Set<String> managed() {
        Map<String, String> sel = Map.of(Manifests.MANAGED_BY, Manifests.MANAGER);
        String ns = MockCluster.NAMESPACE;
        List<HasMetadata> all = new ArrayList<>();
        all.addAll(k().pods().inNamespace(ns).withLabels(sel).list().getItems());
        all.addAll(k().services().inNamespace(ns).withLabels(sel).list().getItems());
        all.addAll(k().secrets().inNamespace(ns).withLabels(sel).list().getItems());
        all.addAll(k().persistentVolumeClaims().inNamespace(ns).withLabels(sel).list().getItems());
        all.addAll(k().network().v1().networkPolicies().inNamespace(ns).withLabels(sel).list().getItems());
        return all.stream().map(o -> o.getKind() + "/" + o.getMetadata().getName()).collect(Collectors.toCollection(TreeSet::new));
    }

    private static final Set<String> NAMESPACE_POLICIES = Set.of("NetworkPolicy/" + Manifests.WORKLOAD_POLICY,
            "NetworkPolicy/" + Manifests.SUPERVISOR_POLICY);

    private static Set<String> objectsOf(String id, long generation) {
        Set<String> s = new TreeSet<>(NAMESPACE_POLICIES);
        s.addAll(Set.of("Pod/os-sandbox-" + id, "Pod/os-supervisor-" + id, "Service/os-boundary-" + id,
                "Service/os-supervisor-" + id, "PersistentVolumeClaim/os-workspace-" + id, "NetworkPolicy/os-pair-" + id,
                "Secret/os-sandbox-" + id + "-g" + generation, "Secret/os-supervisor-" + id + "-g" + generation));
        return s;
    }

    @Test
    void workloadPodIsGatedUnprivilegedAndMountsOnlyTheRuntimeSecret() {
        Manifests m = new Manifests(KubernetesSettings.parse(cluster.settings()));
        SandboxId id = new SandboxId("s1");
        Pod p = m.workloadPod(id, 3, "registry.example/agent:1", WorkloadIdentity.of(1000, 1001),
                DialDirection.RUNTIME_INITIATED, "10.96.0.7:7443");
        var spec = p.getSpec();
        assertEquals("os-sandbox-s1", p.getMetadata().getName());
        assertEquals(MockCluster.NAMESPACE, p.getMetadata().getNamespace());
        assertEquals(Map.of(Manifests.MANAGED_BY, "openshell", Manifests.GATEWAY_ID, "gw1", Manifests.SANDBOX_ID, "s1",
                Manifests.PAIR, "s1", Manifests.COMPONENT, "pod", Manifests.ROLE, "workload", Manifests.GENERATION, "3"),
                p.getMetadata().getLabels());
        assertEquals(List.of(Manifests.BOOTSTRAP_GATE), spec.getSchedulingGates().stream().map(g -> g.getName()).toList());
        assertEquals(Boolean.FALSE, spec.getAutomountServiceAccountToken());
        assertEquals(Boolean.FALSE, spec.getEnableServiceLinks());
        assertEquals(Boolean.FALSE, spec.getHostNetwork());
        assertEquals(Boolean.FALSE, spec.getHostPID());
        assertEquals(Boolean.FALSE, spec.getHostIPC());
        assertEquals("Never", spec.getRestartPolicy());
        assertEquals(Boolean.TRUE, spec.getSecurityContext().getRunAsNonRoot());
        assertEquals(1000L, spec.getSecurityContext().getRunAsUser());
        assertEquals(1001L, spec.getSecurityContext().getRunAsGroup());
        assertEquals("RuntimeDefault", spec.getSecurityContext().getSeccompProfile().getType());
        var init = spec.getInitContainers().getFirst();
        assertEquals("registry.example/openshell-sandbox:1", init.getImage());
        assertEquals(List.of("cp", "-a", "/opt/openshell-sandbox/.", "/.openshell/runtime/"), init.getCommand());
        var c = spec.getContainers().getFirst();
        assertEquals(1, spec.getContainers().size());
        assertEquals("registry.example/agent:1", c.getImage());
        for (var container : List.of(init, c)) {
            var sc = container.getSecurityContext();
            assertEquals(Boolean.FALSE, sc.getPrivileged());
            assertEquals(Boolean.FALSE, sc.getAllowPrivilegeEscalation());
            assertEquals(Boolean.TRUE, sc.getRunAsNonRoot());
            assertEquals(List.of("ALL"), sc.getCapabilities().getDrop());
            assertEquals(List.of(), sc.getCapabilities().getAdd());
            assertEquals("RuntimeDefault", sc.getSeccompProfile().getType());
        }
        assertEquals(List.of("/.openshell/runtime/bin/openshell-sandbox", "--sandbox", "s1", "--generation", "3",
                "--bundle-file", "/.openshell/bundle/bundle", "--workspace", "/sandbox", "--channel", "tcp:10.96.0.7:7443"),
                c.getCommand());
        assertTrue(c.getVolumeMounts().stream().anyMatch(v -> v.getMountPath().equals("/.openshell/runtime") && v.getReadOnly()));
        assertTrue(c.getVolumeMounts().stream().anyMatch(v -> v.getMountPath().equals("/.openshell/bundle") && v.getReadOnly()));
        List<String> secrets = spec.getVolumes().stream().filter(v -> v.getSecret() != null)
                .map(v -> v.getSecret().getSecretName()).toList();
        assertEquals(List.of("os-sandbox-s1-g3"), secrets, "the workload mounts the runtime's Secret and no other");
        assertEquals(0440, spec.getVolumes().stream().filter(v -> v.getSecret() != null).findFirst().orElseThrow()
                .getSecret().getDefaultMode());
        assertTrue(spec.getVolumes().stream().noneMatch(v -> v.getHostPath() != null));
        assertEquals("os-workspace-s1", spec.getVolumes().stream().filter(v -> v.getPersistentVolumeClaim() != null)
                .findFirst().orElseThrow().getPersistentVolumeClaim().getClaimName());
        assertTrue(spec.getContainers().stream().allMatch(x -> x.getEnv().isEmpty()), "no bundle in an environment");

        Pod listening = m.workloadPod(id, 3, "registry.example/agent:1", WorkloadIdentity.of(1000, 1001),
                DialDirection.SUPERVISOR_INITIATED, "unused");
        assertEquals(List.of("--listen", "tcp:0.0.0.0:7443"), listening.getSpec().getContainers().getFirst().getCommand()
                .subList(9, 11));
    }

    @Test
    void supervisorPodIsGatedNonRestartingReadOnlyAndProbed() {
        Manifests m = new Manifests(KubernetesSettings.parse(cluster.settings()));
        Pod p = m.supervisorPod(new SandboxId("s1"), 3, DialDirection.RUNTIME_INITIATED, "10.96.0.8:7443");
        var spec = p.getSpec();
        assertEquals("os-supervisor-s1", p.getMetadata().getName());
        assertEquals("supervisor", p.getMetadata().getLabels().get(Manifests.ROLE));
        assertEquals("s1", p.getMetadata().getLabels().get(Manifests.PAIR));
        assertEquals(List.of(Manifests.BOOTSTRAP_GATE), spec.getSchedulingGates().stream().map(g -> g.getName()).toList());
        assertEquals("Never", spec.getRestartPolicy());
        assertEquals(Boolean.FALSE, spec.getAutomountServiceAccountToken());
        assertEquals(Boolean.FALSE, spec.getHostNetwork());
        assertEquals(Boolean.TRUE, spec.getSecurityContext().getRunAsNonRoot());
        assertEquals(65532L, spec.getSecurityContext().getRunAsUser());
        assertEquals("RuntimeDefault", spec.getSecurityContext().getSeccompProfile().getType());
        var c = spec.getContainers().getFirst();
        assertEquals("registry.example/openshell-supervisor:1", c.getImage());
        assertEquals(Boolean.TRUE, c.getSecurityContext().getReadOnlyRootFilesystem());
        assertEquals(Boolean.FALSE, c.getSecurityContext().getAllowPrivilegeEscalation());
        assertEquals(List.of("ALL"), c.getSecurityContext().getCapabilities().getDrop());
        assertEquals(1, c.getReadinessProbe().getPeriodSeconds());
        assertEquals("/readyz", c.getReadinessProbe().getHttpGet().getPath());
        assertEquals(List.of("--listen", "tcp:0.0.0.0:7443"), c.getCommand().subList(7, 9));
        assertEquals(List.of("os-supervisor-s1-g3"), spec.getVolumes().stream().filter(v -> v.getSecret() != null)
                .map(v -> v.getSecret().getSecretName()).toList());
    }

    @Test
    void policiesServicesAndSecretsAreAsSpecified() {
        Manifests m = new Manifests(KubernetesSettings.parse(cluster.settings()));
        SandboxId id = new SandboxId("s1");
        var workloads = m.workloadPolicy().getSpec();
        assertEquals(Map.of(Manifests.MANAGED_BY, "openshell", Manifests.ROLE, "workload"), workloads.getPodSelector().getMatchLabels());
        assertEquals(List.of("Ingress", "Egress"), workloads.getPolicyTypes());
        assertEquals(List.of(), workloads.getEgress(), "egress: []");
        assertEquals(List.of(), workloads.getIngress());
        var supervisors = m.supervisorPolicy().getSpec();
        assertEquals(Map.of(Manifests.MANAGED_BY, "openshell", Manifests.ROLE, "supervisor"), supervisors.getPodSelector().getMatchLabels());
        assertEquals(List.of("Egress"), supervisors.getPolicyTypes());
        assertEquals(List.of(new NetworkPolicyEgressRule()), supervisors.getEgress(), "one rule allowing all egress");
        var pair = m.pairPolicy(id).getSpec();
        assertEquals(Map.of(Manifests.MANAGED_BY, "openshell", Manifests.PAIR, "s1"), pair.getPodSelector().getMatchLabels());
        assertEquals(List.of("Ingress", "Egress"), pair.getPolicyTypes());
        assertEquals(1, pair.getIngress().size());
        assertEquals(pair.getPodSelector(), pair.getIngress().getFirst().getFrom().getFirst().getPodSelector());
        assertEquals(7443, pair.getIngress().getFirst().getPorts().getFirst().getPort().getIntVal());
        assertEquals("TCP", pair.getIngress().getFirst().getPorts().getFirst().getProtocol());
        assertEquals(1, pair.getEgress().size());
        assertEquals(pair.getPodSelector(), pair.getEgress().getFirst().getTo().getFirst().getPodSelector());
        assertEquals(7443, pair.getEgress().getFirst().getPorts().getFirst().getPort().getIntVal());

        Service boundary = m.boundaryService(id);
        assertEquals("os-boundary-s1", boundary.getMetadata().getName());
        assertEquals(Map.of(Manifests.PAIR, "s1", Manifests.ROLE, "workload"), boundary.getSpec().getSelector());
        Service sup = m.supervisorService(id);
        assertEquals("os-supervisor-s1", sup.getMetadata().getName());
        assertEquals(Map.of(Manifests.PAIR, "s1", Manifests.ROLE, "supervisor"), sup.getSpec().getSelector());
        assertEquals(7443, sup.getSpec().getPorts().getFirst().getPort());

        var rs = m.runtimeSecret(id, 3, RUNTIME_BUNDLE);
        var ss = m.supervisorSecret(id, 3, SUPERVISOR_BUNDLE);
        assertEquals("os-sandbox-s1-g3", rs.getMetadata().getName());
        assertEquals("os-supervisor-s1-g3", ss.getMetadata().getName());
        assertEquals(Boolean.TRUE, rs.getImmutable());
        assertEquals(Boolean.TRUE, ss.getImmutable());
        assertEquals(Map.of("bundle", Base64.getEncoder().encodeToString(RUNTIME_BUNDLE)), rs.getData());
        assertEquals(Map.of("bundle", Base64.getEncoder().encodeToString(SUPERVISOR_BUNDLE)), ss.getData());
        assertEquals("workload", rs.getMetadata().getLabels().get(Manifests.ROLE));
        assertEquals("supervisor", ss.getMetadata().getLabels().get(Manifests.ROLE));
    }

    @Test
    void createObservesPoliciesFirstCreatesGatedPodsThenReleasesThem() throws Exception {
        Provisioned p = driver.create(plan("s1", 1));
        assertEquals(objectsOf("s1", 1), managed());

        List<MockCluster.Request> log = List.copyOf(cluster.requests);
        int firstPod = indexOf(log, "POST", "pods");
        int firstSecret = indexOf(log, "POST", "secrets");
        int policiesSeen = lastIndexBefore(log, firstPod, "GET", "/networkpolicies/" + Manifests.WORKLOAD_POLICY);
        assertTrue(indexOf(log, "POST", "networkpolicies") < firstPod, "the policies were created before any Pod");
        assertTrue(policiesSeen >= 0 && policiesSeen < firstPod, "the workload policy was read back before any Pod");
        assertTrue(indexOfPath(log, "GET", "/networkpolicies/" + Manifests.SUPERVISOR_POLICY) < firstPod);
        assertTrue(firstSecret < firstPod, "the Secrets exist before the Pods that mount them");
        for (MockCluster.Request r : log) {
            if (r.method().equals("POST") && r.resource().equals("pods")) {
                Pod sent = Serialization.unmarshal(r.body(), Pod.class);
                assertTrue(KubernetesDriver.gated(sent), "Pod " + sent.getMetadata().getName() + " was created gated");
            }
            if (r.resource().equals("secrets")) {
                assertFalse(r.method().equals("PUT") || r.method().equals("PATCH"), "a Secret is never changed: " + r);
            }
        }
        List<Integer> releases = new ArrayList<>();
        for (int i = 0; i < log.size(); i++) {
            if (log.get(i).method().equals("PATCH") && log.get(i).resource().equals("pods")) {
                releases.add(i);
                assertTrue(log.get(i).body().contains("\"path\":\"/spec/schedulingGates\",\"value\":[]"), log.get(i).body());
                assertTrue(log.get(i).body().contains("\"path\":\"/metadata/uid\""), log.get(i).body());
            }
        }
        assertEquals(2, releases.size(), "both Pods released");
        assertTrue(releases.getFirst() > lastIndexOfPath(log, "GET", "/pods/os-supervisor-s1", releases.getFirst()),
                "released after the driver read the Pods back");
        assertFalse(KubernetesDriver.gated(pod("os-sandbox-s1")));
        assertFalse(KubernetesDriver.gated(pod("os-supervisor-s1")));
        for (String s : List.of("os-sandbox-s1-g1", "os-supervisor-s1-g1")) {
            assertEquals(Boolean.TRUE, k().secrets().inNamespace(MockCluster.NAMESPACE).withName(s).get().getImmutable());
        }
        assertEquals(Base64.getEncoder().encodeToString(RUNTIME_BUNDLE),
                k().secrets().inNamespace(MockCluster.NAMESPACE).withName("os-sandbox-s1-g1").get().getData().get("bundle"));

        cluster.awaitRunning(2);
        assertEquals(List.of(), cluster.gatedButRunning, "the controller never ran a gated Pod");
        DriverStatus status = driver.status(new SandboxId("s1"), p.state());
        assertEquals(DriverStatus.Phase.RUNNING, status.phase(), status.detail());
        assertTrue(status.part(DriverStatus.SUPERVISOR).orElseThrow().alive());

        assertEquals(DialDirection.RUNTIME_INITIATED, p.direction());
        Properties d = properties(p.descriptor().payload());
        assertEquals("tcp", d.getProperty("transport"));
        assertEquals("runtime", d.getProperty("dial"));
        assertEquals("os-supervisor-s1.sandboxes.svc:7443", d.getProperty("supervisor.authority"));
        assertEquals("os-boundary-s1.sandboxes.svc:7443", d.getProperty("boundary.authority"));
        assertEquals(service("os-supervisor-s1").getSpec().getClusterIP() + ":7443", d.getProperty("supervisor.address"));
        assertEquals(service("os-boundary-s1").getSpec().getClusterIP() + ":7443", d.getProperty("boundary.address"));
        assertEquals("0.0.0.0:7443", d.getProperty("listen"));
        assertEquals(List.of("--channel", "tcp:" + d.getProperty("supervisor.address")),
                pod("os-sandbox-s1").getSpec().getContainers().getFirst().getCommand().subList(9, 11));
        assertEquals(KubernetesTopology.fromState(new SandboxId("s1"), p.state()).state().length, p.state().length);
    }

    @Test
    void supervisorInitiatedIsRecordedAndKeptAcrossRestart() {
        Provisioned p = driver.create(plan("s1", 1, Map.of("dial", "supervisor")));
        assertEquals(DialDirection.SUPERVISOR_INITIATED, p.direction());
        assertEquals("supervisor", properties(p.descriptor().payload()).getProperty("dial"));
        String boundary = properties(p.descriptor().payload()).getProperty("boundary.address");
        assertEquals(List.of("--channel", "tcp:" + boundary),
                pod("os-supervisor-s1").getSpec().getContainers().getFirst().getCommand().subList(7, 9));
        driver.stop(new SandboxId("s1"), p.state());
        Provisioned again = driver.start(new SandboxId("s1"), p.state(), plan("s1", 2));
        assertEquals(DialDirection.SUPERVISOR_INITIATED, again.direction());
    }

    @Test
    void restartKeepsBothServicesAndRotatesTheSecrets() throws Exception {
        SandboxId id = new SandboxId("s1");
        Provisioned first = driver.create(plan("s1", 1));
        Service boundary = service("os-boundary-s1");
        Service sup = service("os-supervisor-s1");
        String claimUid = k().persistentVolumeClaims().inNamespace(MockCluster.NAMESPACE).withName("os-workspace-s1").get()
                .getMetadata().getUid();

        driver.stop(id, first.state());
        Set<String> kept = new TreeSet<>(NAMESPACE_POLICIES);
        kept.addAll(Set.of("Service/os-boundary-s1", "Service/os-supervisor-s1", "PersistentVolumeClaim/os-workspace-s1",
                "NetworkPolicy/os-pair-s1"));
        assertEquals(kept, managed(), "stop removes both Pods and that generation's Secrets, keeps the rest");
        assertEquals(DriverStatus.Phase.STOPPED, driver.status(id, first.state()).phase());
        int supervisorDelete = indexOfPath(cluster.requests, "DELETE", "/pods/os-supervisor-s1");
        int workloadDelete = indexOfPath(cluster.requests, "DELETE", "/pods/os-sandbox-s1");
        assertTrue(supervisorDelete >= 0 && supervisorDelete < workloadDelete, "the supervisor is released first");

        Provisioned second = driver.start(id, first.state(), plan("s1", 2));
        assertEquals(objectsOf("s1", 2), managed());
        for (Service[] pair : List.of(new Service[] {boundary, service("os-boundary-s1")},
                new Service[] {sup, service("os-supervisor-s1")})) {
            assertEquals(pair[0].getMetadata().getUid(), pair[1].getMetadata().getUid());
            assertEquals(pair[0].getSpec().getClusterIP(), pair[1].getSpec().getClusterIP());
            assertEquals(pair[0].getSpec().getSelector(), pair[1].getSpec().getSelector());
        }
        assertEquals(claimUid, k().persistentVolumeClaims().inNamespace(MockCluster.NAMESPACE).withName("os-workspace-s1")
                .get().getMetadata().getUid(), "the workspace is kept");
        assertEquals("2", pod("os-supervisor-s1").getMetadata().getLabels().get(Manifests.GENERATION));
        assertEquals(properties(first.descriptor().payload()).getProperty("supervisor.address"),
                properties(second.descriptor().payload()).getProperty("supervisor.address"));
        cluster.awaitRunning(2);
        assertEquals(DriverStatus.Phase.RUNNING, driver.status(id, second.state()).phase());

        // A later gateway restarts it again from what it persisted: the Services still hold.
        try (KubernetesDriver other = cluster.driver()) {
            other.stop(id, second.state());
            other.start(id, second.state(), plan("s1", 3));
        }
        assertEquals(boundary.getMetadata().getUid(), service("os-boundary-s1").getMetadata().getUid());
        assertEquals(sup.getSpec().getClusterIP(), service("os-supervisor-s1").getSpec().getClusterIP());

        DriverException older = assertThrows(DriverException.class, () -> driver.start(id, second.state(), plan("s1", 2)));
        assertEquals(Kind.INVALID, older.kind());
    }

    @Test
    void aStaleStopNeverDeletesARestartedSupervisor() {
        SandboxId id = new SandboxId("s1");
        Provisioned first = driver.create(plan("s1", 1));
        driver.stop(id, first.state());
        Provisioned second = driver.start(id, first.state(), plan("s1", 2));
        String supervisorUid = pod("os-supervisor-s1").getMetadata().getUid();

        driver.stop(id, first.state());
        assertNotNull(pod("os-supervisor-s1"), "the stale stop left the restarted supervisor");
        assertEquals(supervisorUid, pod("os-supervisor-s1").getMetadata().getUid());
        assertNotNull(pod("os-sandbox-s1"));
        assertNotNull(k().secrets().inNamespace(MockCluster.NAMESPACE).withName("os-supervisor-s1-g2").get());
        driver.stop(id, second.state());
        assertNull(pod("os-supervisor-s1"));
    }

    @Test
    void aTamperedNamespacePolicyStopsTheSandboxWithTheReason() throws Exception {
        tampered(() -> {
            NetworkPolicy p = policy(Manifests.WORKLOAD_POLICY);
            p.getSpec().getEgress().add(new NetworkPolicyEgressRule());
            k().network().v1().networkPolicies().inNamespace(MockCluster.NAMESPACE).resource(p).update();
        }, "NetworkPolicy openshell-sandbox-workloads was changed");
    }

    @Test
    void aDeletedPairPolicyStopsTheSandboxWithTheReason() throws Exception {
        tampered(() -> k().network().v1().networkPolicies().inNamespace(MockCluster.NAMESPACE).withName("os-pair-s1").delete(),
                "NetworkPolicy os-pair-s1 is gone or was replaced");
    }

    @Test
    void aTamperedPodStopsTheSandboxWithTheReason() throws Exception {
        tampered(() -> {
            Pod p = pod("os-sandbox-s1");
            p.getSpec().setHostNetwork(true);
            k().pods().inNamespace(MockCluster.NAMESPACE).resource(p).update();
        }, "the security fields of Pod os-sandbox-s1 were changed");
    }

    @Test
    void aReplacedPodStopsTheSandboxWithTheReason() throws Exception {
        tampered(() -> {
            Pod p = pod("os-supervisor-s1");
            k().pods().inNamespace(MockCluster.NAMESPACE).withName("os-supervisor-s1").withGracePeriod(0).delete();
            p.getMetadata().setUid(null);
            p.getMetadata().setResourceVersion(null);
            k().pods().inNamespace(MockCluster.NAMESPACE).resource(p).create();
        }, "Pod os-supervisor-s1 was replaced");
    }

    private void tampered(Runnable tamper, String reason) throws Exception {
        SandboxId id = new SandboxId("s1");
        Provisioned p = driver.create(plan("s1", 1));
        cluster.awaitRunning(2);
        assertEquals(DriverStatus.Phase.RUNNING, driver.status(id, p.state()).phase());
        tamper.run();
        DriverStatus s = driver.status(id, p.state());
        assertEquals(DriverStatus.Phase.STOPPED, s.phase());
        assertTrue(s.detail().contains("fence violated") && s.detail().contains(reason), s.detail());
        assertFalse(s.part(DriverStatus.WORKLOAD).orElseThrow().alive());
        assertNull(pod("os-sandbox-s1"), "the workload Pod was deleted");
        assertNull(pod("os-supervisor-s1"), "the supervisor Pod was deleted");
    }

    @Test
    void oneSurvivingPodIsDeletedAndReportedDegraded() throws Exception {
        SandboxId id = new SandboxId("s1");
        Provisioned p = driver.create(plan("s1", 1));
        cluster.awaitRunning(2);
        k().pods().inNamespace(MockCluster.NAMESPACE).withName("os-supervisor-s1").withGracePeriod(0).delete();
        DriverStatus s = driver.status(id, p.state());
        assertEquals(DriverStatus.Phase.DEGRADED, s.phase(), s.detail());
        assertFalse(s.part(DriverStatus.SUPERVISOR).orElseThrow().alive());
        assertTrue(s.part(DriverStatus.WORKLOAD).orElseThrow().alive());
        assertNull(pod("os-sandbox-s1"), "the workload never runs on alone");
    }

    @Test
    void aFailedSupervisorPodIsReportedAndTheWorkloadNeverRunsOnAlone() throws Exception {
        SandboxId id = new SandboxId("s1");
        Provisioned p = driver.create(plan("s1", 1));
        cluster.awaitRunning(2);
        Pod sup = pod("os-supervisor-s1");
        sup.getStatus().setPhase("Failed");
        k().pods().inNamespace(MockCluster.NAMESPACE).resource(sup).update();
        DriverStatus s = driver.status(id, p.state());
        assertEquals(DriverStatus.Phase.DEGRADED, s.phase(), s.detail());
        assertEquals("Pod os-supervisor-s1 Failed", s.part(DriverStatus.SUPERVISOR).orElseThrow().detail());
        assertFalse(s.part(DriverStatus.SUPERVISOR).orElseThrow().alive());
        assertNull(pod("os-sandbox-s1"), "the workload Pod was deleted");
        assertNotNull(pod("os-supervisor-s1"), "the failed supervisor Pod is left for its logs until stop or delete");
        driver.delete(id, p.state());
        assertEquals(NAMESPACE_POLICIES, managed());
    }

    @Test
    void deleteLeavesNothingEvenWithTheSupervisorGone() {
        SandboxId id = new SandboxId("s1");
        Provisioned p = driver.create(plan("s1", 1));
        Provisioned other = driver.create(plan("s2", 1));
        k().pods().inNamespace(MockCluster.NAMESPACE).withName("os-supervisor-s1").withGracePeriod(0).delete();
        driver.delete(id, p.state());
        Set<String> left = objectsOf("s2", 1);
        assertEquals(left, managed(), "only the other sandbox and the shared namespace policies are left");
        driver.delete(id, p.state());
        driver.delete(id, "garbage".getBytes(StandardCharsets.UTF_8));
        assertEquals(DriverStatus.Phase.GONE, driver.status(id, p.state()).phase());
        driver.delete(new SandboxId("s2"), other.state());
        assertEquals(NAMESPACE_POLICIES, managed());
    }

    @Test
    void theOrphanSweepRemovesOnlyThisGatewaysAbandonedObjects() {
        driver.create(plan("live", 1));
        // An interrupted create of "lost": its Secret and Pod exist, its boundary Service never did.
        Manifests m = new Manifests(KubernetesSettings.parse(cluster.settings()));
        SandboxId lost = new SandboxId("lost");
        k().resource(m.runtimeSecret(lost, 1, RUNTIME_BUNDLE)).inNamespace(MockCluster.NAMESPACE).create();
        k().resource(m.supervisorService(lost)).inNamespace(MockCluster.NAMESPACE).create();
        // Another gateway's abandoned object is never touched.
        Map<String, String> otherGateway = new HashMap<>(m.labels(new SandboxId("theirs"), "secret"));
        otherGateway.put(Manifests.GATEWAY_ID, "gw2");
        k().resource(new SecretBuilder().withNewMetadata().withName("theirs").withLabels(otherGateway).endMetadata().build())
                .inNamespace(MockCluster.NAMESPACE).create();

        assertEquals(Set.of(), driver.sweepOrphans(KubernetesDriver.ORPHAN_GRACE), "young objects are left to their create");
        assertEquals(Set.of("lost"), driver.sweepOrphans(Duration.ZERO));
        Set<String> left = objectsOf("live", 1);
        left.add("Secret/theirs");
        assertEquals(left, managed());
    }

    @Test
    void aFailedCreateLeavesNothing() {
        cluster.server.expect().post().withPath("/api/v1/namespaces/sandboxes/pods")
                .andReturn(500, new StatusBuilder().withCode(500).withMessage("etcd is sad").build()).once();
        DriverException e = assertThrows(DriverException.class, () -> driver.create(plan("s1", 1)));
        assertEquals(Kind.FAILED, e.kind());
        assertTrue(e.getMessage().contains("create pods os-sandbox-s1"), e.getMessage());
        assertEquals(NAMESPACE_POLICIES, managed(), "nothing of the sandbox is left");
        driver.create(plan("s1", 1));
        assertEquals(objectsOf("s1", 1), managed());
    }

    @Test
    void aServiceWithoutClusterIpFailsTheCreateAtTheBound() {
        cluster.assignClusterIps.set(false);
        long begin = System.nanoTime();
        DriverException e = assertThrows(DriverException.class, () -> driver.create(plan("s1", 1)));
        assertTrue(Duration.ofNanos(System.nanoTime() - begin).compareTo(KubernetesDriver.SERVICE_ADDRESS_WAIT) >= 0);
        assertEquals(Kind.FAILED, e.kind());
        assertTrue(e.getMessage().contains("got no ClusterIP within PT10S"), e.getMessage());
        assertEquals(NAMESPACE_POLICIES, managed());
    }

    @Test
    void anExistingSandboxOrAForeignPolicyIsNeverOverwritten() {
        driver.create(plan("s1", 1));
        Set<String> before = managed();
        DriverException again = assertThrows(DriverException.class, () -> driver.create(plan("s1", 1)));
        assertEquals(Kind.FAILED, again.kind());
        assertEquals(before, managed(), "a second create of the same id changes nothing");

        NetworkPolicy p = policy(Manifests.SUPERVISOR_POLICY);
        p.getSpec().setPolicyTypes(List.of("Ingress"));
        k().network().v1().networkPolicies().inNamespace(MockCluster.NAMESPACE).resource(p).update();
        DriverException e = assertThrows(DriverException.class, () -> driver.create(plan("s2", 1)));
        assertEquals(Kind.FAILED, e.kind());
        assertTrue(e.getMessage().contains("differs from the fence"), e.getMessage());
        assertEquals(before, managed());
    }

    @Test
    void errorsAreMappedAndNameWhatIsMissing() throws IOException {
        int closed;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            closed = s.getLocalPort();
        }
        Map<String, String> away = cluster.settings();
        away.put("api.server", "http://127.0.0.1:" + closed + "/");
        try (KubernetesDriver unreachable = cluster.driver(away)) {
            DriverException e = assertThrows(DriverException.class, () -> unreachable.create(plan("s1", 1)));
            assertEquals(Kind.UNAVAILABLE, e.kind());
            assertTrue(e.getMessage().contains("http://127.0.0.1:" + closed) && e.getMessage().contains("unreachable"),
                    e.getMessage());
        }

        cluster.server.expect().post().withPath("/api/v1/namespaces/sandboxes/services")
                .andReturn(403, new StatusBuilder().withCode(403).withReason("Forbidden").withMessage("services is forbidden").build())
                .once();
        DriverException forbidden = assertThrows(DriverException.class, () -> driver.create(plan("s1", 1)));
        assertEquals(Kind.UNAVAILABLE, forbidden.kind());
        assertTrue(forbidden.getMessage().contains("the verb 'create' on 'services'"), forbidden.getMessage());
        assertEquals(NAMESPACE_POLICIES, managed());

        Map<String, String> unfenced = cluster.settings();
        unfenced.put("network-policy-enforced", "false");
        try (KubernetesDriver d = cluster.driver(unfenced)) {
            int before = cluster.requests.size();
            DriverException e = assertThrows(DriverException.class, () -> d.create(plan("s1", 1)));
            assertEquals(Kind.UNAVAILABLE, e.kind());
            assertTrue(e.getMessage().contains("network-policy-enforced=true"), e.getMessage());
            assertEquals(before, cluster.requests.size(), "refused before any request reached the API server");
        }
        unfenced.remove("network-policy-enforced");
        try (KubernetesDriver d = cluster.driver(unfenced)) {
            assertEquals(Kind.UNAVAILABLE, assertThrows(DriverException.class, () -> d.create(plan("s1", 1))).kind());
        }

        for (Consumer<Map<String, String>> bad : List.<Consumer<Map<String, String>>>of(
                s -> s.put("nonsense", "1"), s -> s.remove("namespace"), s -> s.put("namespace", "Not_A_Label"),
                s -> s.put("boundary.port", "80"), s -> s.put("api.server", "ftp://x"), s -> s.remove("runtime.image"),
                s -> s.put("network-policy-enforced", "yes"), s -> s.put("supervisor.uid", "0"))) {
            Map<String, String> s = cluster.settings();
            bad.accept(s);
            assertEquals(Kind.INVALID, assertThrows(DriverException.class, () -> KubernetesSettings.parse(s)).kind(), s.toString());
        }
        for (Map<String, String> options : List.of(Map.of("unknown", "x"), Map.of("dial", "both"), Map.of("image", "bad image"))) {
            assertEquals(Kind.INVALID, assertThrows(DriverException.class, () -> driver.create(plan("s1", 1, options))).kind());
        }
        assertEquals(NAMESPACE_POLICIES, managed(), "bad input changed nothing");
        assertEquals(Kind.INVALID, assertThrows(DriverException.class,
                () -> driver.status(new SandboxId("s1"), "x=1".getBytes(StandardCharsets.UTF_8))).kind());
    }

    @Test
    void boundsHoldAtTheirValues() {
        String longest = "a".repeat(Manifests.MAX_SANDBOX_ID_CHARS);
        assertEquals(49, longest.length());
        driver.create(plan(longest, 1));
        assertNotNull(service("os-supervisor-" + longest));
        assertEquals(63, ("os-supervisor-" + longest).length());
        DriverException tooLong = assertThrows(DriverException.class, () -> driver.create(plan(longest + "b", 1)));
        assertEquals(Kind.INVALID, tooLong.kind());

        String image = "r/" + "a".repeat(KubernetesSettings.MAX_IMAGE_CHARS - 2);
        assertEquals(image, KubernetesSettings.image(image, "x"));
        assertEquals(Kind.INVALID, assertThrows(DriverException.class, () -> KubernetesSettings.image(image + "a", "x")).kind());
        assertEquals(0, KubernetesDriver.REQUEST_RETRIES);
    }

    @Test
    void theProviderIsFoundByNameAndRefusesBadSettings(@org.junit.jupiter.api.io.TempDir Path dir) {
        var registry = openshell.driver.DriverRegistry.load();
        assertTrue(registry.names().contains("kubernetes"), registry.names().toString());
        DriverException e = assertThrows(DriverException.class,
                () -> registry.driver("kubernetes", new DriverEnvironment(dir, Map.of("namespace", "x"))));
        assertEquals(Kind.INVALID, e.kind());
        try (var d = registry.driver("kubernetes", new DriverEnvironment(dir, cluster.settings()))) {
            assertEquals("kubernetes", d.name());
        }
    }

    @Test
    void roleGrantsExactlyTheVerbsTheDriverUses() throws Exception {
        SandboxId id = new SandboxId("s1");
        Provisioned p = driver.create(plan("s1", 1));
        cluster.server.expect().post().withPath("/api/v1/namespaces/sandboxes/pods")
                .andReturn(500, new StatusBuilder().withCode(500).withMessage("injected").build()).once();
        assertThrows(DriverException.class, () -> driver.create(plan("s9", 1)));
        cluster.awaitRunning(2);
        driver.status(id, p.state());
        driver.stop(id, p.state());
        Provisioned q = driver.start(id, p.state(), plan("s1", 2));
        k().pods().inNamespace(MockCluster.NAMESPACE).withName("os-supervisor-s1").withGracePeriod(0).delete();
        driver.status(id, q.state());
        driver.sweepOrphans(Duration.ZERO);
        driver.delete(id, q.state());

        Set<String> used = cluster.requests.stream().map(r -> r.resource() + ":" + r.verb())
                .collect(Collectors.toCollection(TreeSet::new));
        Role role;
        try (InputStream in = Files.newInputStream(Path.of("../../deploy/kubernetes/role.yaml"))) {
            role = Serialization.unmarshal(in, Role.class);
        }
        Set<String> granted = new TreeSet<>();
        role.getRules().forEach(r -> r.getResources().forEach(res -> r.getVerbs().forEach(v -> granted.add(res + ":" + v))));
        assertEquals(granted, used, "deploy/kubernetes/role.yaml must grant exactly the verbs the driver uses");
    }

    private static Properties properties(byte[] payload) {
        Properties p = new Properties();
        try {
            p.load(new java.io.StringReader(new String(payload, StandardCharsets.ISO_8859_1)));
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        return p;
    }

    private static int indexOf(List<MockCluster.Request> log, String method, String resource) {
        for (int i = 0; i < log.size(); i++) {
            if (log.get(i).method().equals(method) && log.get(i).resource().equals(resource)) {
                return i;
            }
        }
        return Integer.MAX_VALUE;
    }

    private static int indexOfPath(List<MockCluster.Request> log, String method, String suffix) {
        for (int i = 0; i < log.size(); i++) {
            if (log.get(i).method().equals(method) && log.get(i).path().endsWith(suffix)) {
                return i;
            }
        }
        return Integer.MAX_VALUE;
    }

    private static int lastIndexBefore(List<MockCluster.Request> log, int before, String method, String suffix) {
        return lastIndexOfPath(log, method, suffix, before);
    }

    private static int lastIndexOfPath(List<MockCluster.Request> log, String method, String suffix, int before) {
        int found = -1;
        for (int i = 0; i < Math.min(before, log.size()); i++) {
            if (log.get(i).method().equals(method) && log.get(i).path().endsWith(suffix)) {
                found = i;
            }
        }
        return found;
    }

    @Test
    void stateIsStableAndRefusesAnotherSandbox() {
        Provisioned p = driver.create(plan("s1", 1));
        KubernetesTopology t = KubernetesTopology.fromState(new SandboxId("s1"), p.state());
        assertEquals(p.state().length, t.state().length);
        assertNotEquals("", t.workloadPodUid());
        assertEquals(Kind.INVALID, assertThrows(DriverException.class,
                () -> KubernetesTopology.fromState(new SandboxId("s2"), p.state())).kind());
    }
}
