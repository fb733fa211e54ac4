package openshell.driver.kubernetes;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.http.HttpClient;
import io.fabric8.kubernetes.client.jdkhttp.JdkHttpClientFactory;
import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.driver.DriverStatus;
import openshell.driver.DriverStatus.Part;
import openshell.driver.DriverStatus.Phase;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.isolation.SandboxId;

/**
 * Places each sandbox as a workload Pod and a supervisor Pod in one namespace, fenced by NetworkPolicies
 * that exist and are observed before either Pod is admitted. See the module documentation.
 */
final class KubernetesDriver implements ComputeDriver {
    /** Longest wait for the API server to connect. */
    static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** Longest wait for one API request. */
    static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(30);
    /** Retries of a failed request inside the client: none, the driver's caller decides. */
    static final int REQUEST_RETRIES = 0;
    /** Longest wait for a new Service's ClusterIP. */
    static final Duration SERVICE_ADDRESS_WAIT = Duration.ofSeconds(10);
    /** Poll interval while waiting for a ClusterIP. */
    static final Duration SERVICE_ADDRESS_POLL = Duration.ofMillis(50);
    /** Age after which a sandbox's objects without its boundary Service are an interrupted create or delete. */
    static final Duration ORPHAN_GRACE = Duration.ofMinutes(5);
    /** The launch options this driver reads. */
    static final Set<String> OPTIONS = Set.of("image", "dial");

    private static final System.Logger LOG = System.getLogger(KubernetesDriver.class.getName());

    private final KubernetesSettings settings;
    private final Manifests manifests;
    private final ClusterApi api;
    private final Clock clock;

    KubernetesDriver(KubernetesSettings settings, KubernetesClient client, Clock clock) {
        this.settings = Objects.requireNonNull(settings);
        this.manifests = new Manifests(settings);
        this.api = new ClusterApi(client, settings.namespace());
        this.clock = clock;
    }

    static KubernetesDriver open(DriverEnvironment environment) {
        KubernetesSettings settings = KubernetesSettings.parse(environment.settings());
        KubernetesDriver driver = new KubernetesDriver(settings, client(settings, b -> { }), Clock.systemUTC());
        try {
            driver.sweepOrphans(ORPHAN_GRACE);
        } catch (DriverException e) {
            // Sweeping is housekeeping: a cluster unreachable now fails the first real call with the reason.
            LOG.log(System.Logger.Level.WARNING, "openshell kubernetes driver: orphan sweep skipped: " + e.getMessage());
        }
        return driver;
    }

    /**
     * @param settings the driver's settings
     * @param http     adjusts the HTTP client (tests record requests through it)
     * @return a client for the configured API server, or for the in-cluster service account or kubeconfig
     */
    static KubernetesClient client(KubernetesSettings settings, Consumer<HttpClient.Builder> http) {
        Config base = settings.apiServer().isPresent() ? Config.empty() : Config.autoConfigure(null);
        ConfigBuilder b = new ConfigBuilder(base).withNamespace(settings.namespace())
                .withConnectionTimeout((int) CONNECT_TIMEOUT.toMillis()).withRequestTimeout((int) REQUEST_TIMEOUT.toMillis())
                .withRequestRetryBackoffLimit(REQUEST_RETRIES);
        settings.apiServer().ifPresent(u -> b.withMasterUrl(u.toString()));
        boolean cleartext = settings.apiServer().map(u -> u.getScheme().equals("http")).orElse(false);
        return new KubernetesClientBuilder().withConfig(b.build()).withHttpClientFactory(new JdkHttpClientFactory() {
            @Override
            protected void additionalConfig(java.net.http.HttpClient.Builder builder) {
                // Over cleartext the JDK client would try an h2c upgrade, which API servers do not offer.
                if (cleartext) {
                    builder.version(java.net.http.HttpClient.Version.HTTP_1_1);
                }
            }
        }).withHttpClientBuilderConsumer(http::accept).build();
    }

    @Override
    public String name() {
        return KubernetesDriverProvider.NAME;
    }

    @Override
    public Provisioned create(LaunchPlan plan) {
        SandboxId id = plan.context().sandboxId();
        Manifests.requireNameable(id);
        String image = image(plan);
        DialDirection direction = direction(plan);
        requireFence();
        List<String> existing = owned(id);
        if (!existing.isEmpty()) {
            throw new DriverException(Kind.FAILED, "objects of sandbox " + id.value() + " already exist in namespace "
                    + settings.namespace() + ": " + existing + "; delete it first");
        }
        Deque<HasMetadata> made = new ArrayDeque<>();
        try {
            Map<String, String> policies = observeNamespacePolicies();
            // The boundary Service is the first object of a sandbox and the last removed: a sandbox with
            // objects but without it is an interrupted create or delete, which the orphan sweep removes.
            Service boundary = created(made, "services", manifests.boundaryService(id));
            Service supervisor = created(made, "services", manifests.supervisorService(id));
            created(made, "persistentvolumeclaims", manifests.workspace(id));
            created(made, "networkpolicies", manifests.pairPolicy(id));
            String pairUid = observePolicy(Manifests.pairPolicyName(id), manifests.pairPolicySpec(id)).getMetadata().getUid();
            String boundaryAddress = address(boundary);
            String supervisorAddress = address(supervisor);
            KubernetesTopology t = launch(made, id, plan, image, direction, boundaryAddress, supervisorAddress,
                    uid(boundary), uid(supervisor), policies, pairUid);
            return Provisioned.of(t.descriptor(), direction, t.state());
        } catch (RuntimeException e) {
            undo(made, e);
            throw e;
        }
    }

    @Override
    public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
        KubernetesTopology t = KubernetesTopology.fromState(id, state);
        if (!plan.context().sandboxId().equals(id)) {
            throw new DriverException(Kind.INVALID, "the launch is for sandbox " + plan.context().sandboxId().value()
                    + ", not " + id.value());
        }
        if (plan.runtimeGeneration() <= t.generation()) {
            throw new DriverException(Kind.INVALID, "generation " + plan.runtimeGeneration()
                    + " is not higher than the recorded " + t.generation());
        }
        String image = image(plan);
        requireFence();
        // The Services are kept as they are (UID, ClusterIP, selector): a peer or a DNS cache that knew
        // them before the restart still reaches the right Pod.
        String boundaryAddress = keptService(Manifests.boundaryServiceName(id), t.boundaryServiceUid(), id, Manifests.WORKLOAD);
        String supervisorAddress = keptService(Manifests.supervisorServiceName(id), t.supervisorServiceUid(), id,
                Manifests.SUPERVISOR);
        stop(id, state);
        Deque<HasMetadata> made = new ArrayDeque<>();
        try {
            Map<String, String> policies = observeNamespacePolicies();
            NetworkPolicy pair = get("networkpolicies", Manifests.pairPolicyName(id), NetworkPolicy.class);
            if (pair == null) {
                created(made, "networkpolicies", manifests.pairPolicy(id));
            }
            String pairUid = observePolicy(Manifests.pairPolicyName(id), manifests.pairPolicySpec(id)).getMetadata().getUid();
            KubernetesTopology next = launch(made, id, plan, image, t.direction(), boundaryAddress, supervisorAddress,
                    t.boundaryServiceUid(), t.supervisorServiceUid(), policies, pairUid);
            return Provisioned.of(next.descriptor(), t.direction(), next.state());
        } catch (RuntimeException e) {
            undo(made, e);
            throw e;
        }
    }

    /** Secrets, then both Pods gated; checked as the server holds them; then released. */
    private KubernetesTopology launch(Deque<HasMetadata> made, SandboxId id, LaunchPlan plan, String image,
                                      DialDirection direction, String boundaryAddress, String supervisorAddress,
                                      String boundaryServiceUid, String supervisorServiceUid, Map<String, String> policies,
                                      String pairUid) {
        long generation = plan.runtimeGeneration();
        created(made, "secrets", manifests.runtimeSecret(id, generation, plan.material().runtimeBundle()));
        created(made, "secrets", manifests.supervisorSecret(id, generation, plan.material().supervisorBundle()));
        Pod workloadWanted = manifests.workloadPod(id, generation, image, plan.context().workload(), direction, supervisorAddress);
        Pod supervisorWanted = manifests.supervisorPod(id, generation, direction, boundaryAddress);
        Pod workload = created(made, "pods", workloadWanted);
        Pod supervisor = created(made, "pods", supervisorWanted);
        String workloadView = admitted(workload, workloadWanted);
        String supervisorView = admitted(supervisor, supervisorWanted);
        // Everything the Pods need is in place and checked; the fence is observed once more before release.
        if (!observeNamespacePolicies().equals(policies)) {
            throw new DriverException(Kind.FAILED, "a namespace NetworkPolicy was replaced while sandbox " + id.value()
                    + " was being provisioned; nothing was released");
        }
        release(workload);
        release(supervisor);
        return new KubernetesTopology(settings.namespace(), id, generation, direction, settings.boundaryPort(),
                boundaryAddress, supervisorAddress, boundaryServiceUid, supervisorServiceUid,
                policies.get(Manifests.WORKLOAD_POLICY), policies.get(Manifests.SUPERVISOR_POLICY), pairUid,
                uid(workload), uid(supervisor), workloadView, supervisorView);
    }

    /** The Pod as the server holds it: still gated, and every fence field as the driver wrote it. */
    private String admitted(Pod created, Pod wanted) {
        String name = created.getMetadata().getName();
        Pod live = get("pods", name, Pod.class);
        if (live == null || !uid(live).equals(uid(created))) {
            throw new DriverException(Kind.FAILED, "Pod " + name + " was removed or replaced before its release");
        }
        if (!gated(live)) {
            throw new DriverException(Kind.FAILED, "Pod " + name + " lost its scheduling gate " + Manifests.BOOTSTRAP_GATE
                    + " before the driver released it");
        }
        String view = Manifests.securityView(live);
        if (!view.equals(Manifests.securityView(wanted))) {
            throw new DriverException(Kind.FAILED, "Pod " + name + " as admitted differs from what the driver wrote "
                    + "(an admission webhook or another writer changed it): " + view);
        }
        return view;
    }

    static boolean gated(Pod pod) {
        return pod.getSpec().getSchedulingGates() != null && pod.getSpec().getSchedulingGates().stream()
                .anyMatch(g -> Manifests.BOOTSTRAP_GATE.equals(g.getName()));
    }

    private void release(Pod pod) {
        String name = pod.getMetadata().getName();
        // The JSON patch tests the UID first: a Pod replaced since the driver checked it is never released.
        String patch = "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"" + uid(pod) + "\"},"
                + "{\"op\":\"replace\",\"path\":\"/spec/schedulingGates\",\"value\":[]}]";
        api.run("patch", "pods", name, () -> api.client().pods().inNamespace(settings.namespace()).withName(name)
                .patch(PatchContext.of(PatchType.JSON), patch));
    }

    @Override
    public void stop(SandboxId id, byte[] state) {
        KubernetesTopology t = KubernetesTopology.fromState(id, state);
        // Release first (the supervisor gives up control), then suspend the workload. A stop read from an
        // older state never removes a Pod of a later generation: only the UIDs it recorded are deleted.
        deletePodIf(Manifests.supervisorPodName(id), t.supervisorPodUid());
        deletePodIf(Manifests.workloadPodName(id), t.workloadPodUid());
        deleteSecret(Manifests.supervisorSecretName(id, t.generation()));
        deleteSecret(Manifests.runtimeSecretName(id, t.generation()));
    }

    private void deletePodIf(String name, String recordedUid) {
        Pod live = get("pods", name, Pod.class);
        if (live != null && uid(live).equals(recordedUid)) {
            api.run("delete", "pods", name, () -> api.client().pods().inNamespace(settings.namespace()).withName(name)
                    .withGracePeriod(0).delete());
        }
    }

    private void deleteSecret(String name) {
        api.run("delete", "secrets", name, () -> api.client().secrets().inNamespace(settings.namespace()).withName(name).delete());
    }

    /**
     * The trusted cleanup path: every object labelled with the sandbox's id and this gateway's id, whether
     * or not the supervisor is alive, whatever the state says. The boundary Service goes last.
     */
    @Override
    public void delete(SandboxId id, byte[] state) {
        deleteLabelled(id);
    }

    private void deleteLabelled(SandboxId id) {
        Map<String, String> sel = Map.of(Manifests.MANAGED_BY, Manifests.MANAGER, Manifests.GATEWAY_ID,
                settings.gatewayId(), Manifests.SANDBOX_ID, id.value());
        var ns = api.client();
        for (Pod p : api.call("list", "pods", "", () -> ns.pods().inNamespace(settings.namespace()).withLabels(sel).list().getItems())) {
            api.run("delete", "pods", p.getMetadata().getName(), () -> ns.pods().inNamespace(settings.namespace())
                    .withName(p.getMetadata().getName()).withGracePeriod(0).delete());
        }
        for (var s : api.call("list", "secrets", "", () -> ns.secrets().inNamespace(settings.namespace()).withLabels(sel).list().getItems())) {
            deleteSecret(s.getMetadata().getName());
        }
        for (var p : api.call("list", "networkpolicies", "", () -> ns.network().v1().networkPolicies()
                .inNamespace(settings.namespace()).withLabels(sel).list().getItems())) {
            api.run("delete", "networkpolicies", p.getMetadata().getName(), () -> ns.network().v1().networkPolicies()
                    .inNamespace(settings.namespace()).withName(p.getMetadata().getName()).delete());
        }
        for (var c : api.call("list", "persistentvolumeclaims", "", () -> ns.persistentVolumeClaims()
                .inNamespace(settings.namespace()).withLabels(sel).list().getItems())) {
            api.run("delete", "persistentvolumeclaims", c.getMetadata().getName(), () -> ns.persistentVolumeClaims()
                    .inNamespace(settings.namespace()).withName(c.getMetadata().getName()).delete());
        }
        List<Service> services = new ArrayList<>(api.call("list", "services", "", () -> ns.services()
                .inNamespace(settings.namespace()).withLabels(sel).list().getItems()));
        services.sort((a, b) -> Boolean.compare(a.getMetadata().getName().equals(Manifests.boundaryServiceName(id)),
                b.getMetadata().getName().equals(Manifests.boundaryServiceName(id))));
        for (Service s : services) {
            api.run("delete", "services", s.getMetadata().getName(), () -> ns.services().inNamespace(settings.namespace())
                    .withName(s.getMetadata().getName()).delete());
        }
    }

    @Override
    public DriverStatus status(SandboxId id, byte[] state) {
        KubernetesTopology t = KubernetesTopology.fromState(id, state);
        if (owned(id).isEmpty()) {
            return new DriverStatus(Phase.GONE, "nothing of the sandbox is left");
        }
        Pod workload = get("pods", Manifests.workloadPodName(id), Pod.class);
        Pod supervisor = get("pods", Manifests.supervisorPodName(id), Pod.class);
        Optional<String> violation = fenceViolation(t, workload, supervisor);
        if (violation.isPresent()) {
            // Verified, not assumed: a fence changed behind the driver's back ends the sandbox.
            String why = violation.get();
            deletePodIf(Manifests.supervisorPodName(id), supervisor == null ? "" : uid(supervisor));
            deletePodIf(Manifests.workloadPodName(id), workload == null ? "" : uid(workload));
            return new DriverStatus(Phase.STOPPED, why + "; the driver deleted the workload and supervisor Pods", List.of(
                    new Part(DriverStatus.SUPERVISOR, false, "deleted: " + why),
                    new Part(DriverStatus.RUNTIME, false, "deleted: " + why),
                    new Part(DriverStatus.WORKLOAD, false, "deleted: " + why)));
        }
        boolean workloadUp = alive(workload, t.workloadPodUid());
        boolean supervisorUp = alive(supervisor, t.supervisorPodUid());
        List<Part> parts = List.of(new Part(DriverStatus.SUPERVISOR, supervisorUp, describe(supervisor, "supervisor")),
                new Part(DriverStatus.RUNTIME, workloadUp, describe(workload, "workload")),
                new Part(DriverStatus.WORKLOAD, workloadUp, describe(workload, "workload")));
        if (workloadUp && supervisorUp) {
            return new DriverStatus(Phase.RUNNING, "Pods " + Manifests.workloadPodName(id) + " and " + Manifests.supervisorPodName(id)
                    + " " + phase(workload) + "/" + phase(supervisor) + "; fence holds (NetworkPolicies and Pod security unchanged)", parts);
        }
        if (workloadUp != supervisorUp) {
            // One part alone never runs on.
            if (workloadUp) {
                deletePodIf(Manifests.workloadPodName(id), t.workloadPodUid());
            } else {
                deletePodIf(Manifests.supervisorPodName(id), t.supervisorPodUid());
            }
            return new DriverStatus(Phase.DEGRADED, (workloadUp ? "supervisor" : "workload")
                    + " Pod is gone, the driver deletes the other", parts);
        }
        return new DriverStatus(Phase.STOPPED, "no Pod of generation " + t.generation() + " runs; Services and workspace kept", parts);
    }

    private Optional<String> fenceViolation(KubernetesTopology t, Pod workload, Pod supervisor) {
        Optional<String> ns = namespacePolicyViolation();
        if (ns.isPresent()) {
            return ns;
        }
        NetworkPolicy pair = get("networkpolicies", Manifests.pairPolicyName(t.id()), NetworkPolicy.class);
        if (pair == null || !uid(pair).equals(t.pairPolicyUid())) {
            return Optional.of("fence violated: NetworkPolicy " + Manifests.pairPolicyName(t.id()) + " is gone or was replaced");
        }
        if (!Objects.equals(pair.getSpec(), manifests.pairPolicySpec(t.id()))) {
            return Optional.of("fence violated: NetworkPolicy " + Manifests.pairPolicyName(t.id()) + " was changed");
        }
        for (var p : List.of(new Object[] {workload, t.workloadPodUid(), t.workloadView()},
                new Object[] {supervisor, t.supervisorPodUid(), t.supervisorView()})) {
            Pod pod = (Pod) p[0];
            if (pod == null) {
                continue;
            }
            String name = pod.getMetadata().getName();
            if (!uid(pod).equals(p[1])) {
                return Optional.of("fence violated: Pod " + name + " was replaced by one the driver did not make");
            }
            if (!Manifests.securityView(pod).equals(p[2])) {
                return Optional.of("fence violated: the security fields of Pod " + name + " were changed");
            }
        }
        return Optional.empty();
    }

    private Optional<String> namespacePolicyViolation() {
        for (var p : List.of(Map.entry(Manifests.WORKLOAD_POLICY, manifests.workloadPolicySpec()),
                Map.entry(Manifests.SUPERVISOR_POLICY, manifests.supervisorPolicySpec()))) {
            NetworkPolicy live = get("networkpolicies", p.getKey(), NetworkPolicy.class);
            if (live == null) {
                return Optional.of("fence violated: NetworkPolicy " + p.getKey() + " is gone");
            }
            if (!Objects.equals(live.getSpec(), p.getValue())) {
                return Optional.of("fence violated: NetworkPolicy " + p.getKey() + " was changed");
            }
        }
        return Optional.empty();
    }

    private static boolean alive(Pod pod, String uid) {
        if (pod == null || !uid(pod).equals(uid) || pod.getMetadata().getDeletionTimestamp() != null) {
            return false;
        }
        String phase = phase(pod);
        return phase.equals("Running") || phase.equals("Pending");
    }

    private static String phase(Pod pod) {
        return pod.getStatus() == null || pod.getStatus().getPhase() == null ? "Pending" : pod.getStatus().getPhase();
    }

    private static String describe(Pod pod, String what) {
        return pod == null ? what + " Pod gone" : "Pod " + pod.getMetadata().getName() + " " + phase(pod);
    }

    /**
     * Removes what a gateway left behind an interrupted create or delete: objects of this gateway whose
     * sandbox has no boundary Service any more, once all of them are older than {@code grace}.
     *
     * @return the sandbox ids swept
     */
    Set<String> sweepOrphans(Duration grace) {
        Map<String, String> ours = Map.of(Manifests.MANAGED_BY, Manifests.MANAGER, Manifests.GATEWAY_ID, settings.gatewayId());
        var c = api.client();
        String ns = settings.namespace();
        List<HasMetadata> all = new ArrayList<>();
        all.addAll(api.call("list", "pods", "", () -> c.pods().inNamespace(ns).withLabels(ours).list().getItems()));
        all.addAll(api.call("list", "secrets", "", () -> c.secrets().inNamespace(ns).withLabels(ours).list().getItems()));
        all.addAll(api.call("list", "networkpolicies", "", () -> c.network().v1().networkPolicies().inNamespace(ns)
                .withLabels(ours).list().getItems()));
        all.addAll(api.call("list", "persistentvolumeclaims", "", () -> c.persistentVolumeClaims().inNamespace(ns)
                .withLabels(ours).list().getItems()));
        List<Service> services = api.call("list", "services", "", () -> c.services().inNamespace(ns).withLabels(ours)
                .list().getItems());
        all.addAll(services);
        Set<String> anchored = new TreeSet<>();
        for (Service s : services) {
            String id = s.getMetadata().getLabels().get(Manifests.SANDBOX_ID);
            if (id != null && s.getMetadata().getName().equals("os-boundary-" + id)) {
                anchored.add(id);
            }
        }
        Map<String, Boolean> candidates = new LinkedHashMap<>();
        Instant cutoff = clock.instant().minus(grace);
        for (HasMetadata o : all) {
            String id = o.getMetadata().getLabels().get(Manifests.SANDBOX_ID);
            if (id == null || anchored.contains(id)) {
                continue;
            }
            boolean old = o.getMetadata().getCreationTimestamp() == null
                    || !Instant.parse(o.getMetadata().getCreationTimestamp()).isAfter(cutoff);
            candidates.merge(id, old, Boolean::logicalAnd);
        }
        Set<String> swept = new TreeSet<>();
        candidates.forEach((id, old) -> {
            if (old) {
                deleteLabelled(new SandboxId(id));
                swept.add(id);
            }
        });
        return swept;
    }

    private void requireFence() {
        if (!settings.networkPolicyEnforced()) {
            throw new DriverException(Kind.UNAVAILABLE, "refusing to create a sandbox in namespace " + settings.namespace()
                    + ": the operator has not stated that this cluster's CNI enforces NetworkPolicy (driver setting "
                    + "network-policy-enforced=true); without enforcement the workload Pod would have no fence");
        }
    }

    /** Both namespace policies exist (created when absent) and hold exactly the driver's specs: name to UID. */
    private Map<String, String> observeNamespacePolicies() {
        Map<String, String> uids = new LinkedHashMap<>();
        for (NetworkPolicy wanted : List.of(manifests.workloadPolicy(), manifests.supervisorPolicy())) {
            String name = wanted.getMetadata().getName();
            if (get("networkpolicies", name, NetworkPolicy.class) == null) {
                api.call("create", "networkpolicies", name, () -> api.client().network().v1().networkPolicies()
                        .inNamespace(settings.namespace()).resource(wanted).create());
            }
            uids.put(name, uid(observePolicy(name, wanted.getSpec())));
        }
        return uids;
    }

    /** Reads a policy back: it must carry a UID and resourceVersion and exactly the wanted spec. */
    private NetworkPolicy observePolicy(String name, Object spec) {
        NetworkPolicy live = get("networkpolicies", name, NetworkPolicy.class);
        if (live == null || live.getMetadata().getUid() == null || live.getMetadata().getResourceVersion() == null) {
            throw new DriverException(Kind.FAILED, "NetworkPolicy " + name + " in namespace " + settings.namespace()
                    + " could not be observed after it was created");
        }
        if (!Objects.equals(live.getSpec(), spec)) {
            throw new DriverException(Kind.FAILED, "NetworkPolicy " + name + " in namespace " + settings.namespace()
                    + " differs from the fence the driver requires; refusing to admit Pods (fix or delete it)");
        }
        return live;
    }

    private String keptService(String name, String recordedUid, SandboxId id, String role) {
        Service s = get("services", name, Service.class);
        if (s == null || !uid(s).equals(recordedUid)) {
            throw new DriverException(Kind.FAILED, "Service " + name + " is gone or was replaced; delete the sandbox");
        }
        if (!Objects.equals(s.getSpec().getSelector(), Manifests.serviceSelector(id, role))) {
            throw new DriverException(Kind.FAILED, "Service " + name + " no longer selects only the sandbox's " + role + " Pod");
        }
        return address(s);
    }

    /** The Service's ClusterIP and port, waiting a bounded time for the API server to assign it. */
    private String address(Service created) {
        String name = created.getMetadata().getName();
        Instant deadline = clock.instant().plus(SERVICE_ADDRESS_WAIT);
        Service s = created;
        while (true) {
            String ip = s.getSpec() == null ? null : s.getSpec().getClusterIP();
            if (ip != null && !ip.isEmpty() && !ip.equals("None")) {
                return (ip.contains(":") ? "[" + ip + "]" : ip) + ":" + settings.boundaryPort();
            }
            if (clock.instant().isAfter(deadline)) {
                throw new DriverException(Kind.FAILED, "Service " + name + " got no ClusterIP within " + SERVICE_ADDRESS_WAIT);
            }
            try {
                Thread.sleep(SERVICE_ADDRESS_POLL);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new DriverException(Kind.FAILED, "interrupted while waiting for Service " + name, e);
            }
            s = get("services", name, Service.class);
            if (s == null) {
                throw new DriverException(Kind.FAILED, "Service " + name + " vanished after it was created");
            }
        }
    }

    private <T extends HasMetadata> T created(Deque<HasMetadata> made, String resource, T object) {
        String name = object.getMetadata().getName();
        T result = api.call("create", resource, name, () -> api.client().resource(object)
                .inNamespace(settings.namespace()).create());
        made.push(result);
        return result;
    }

    private <T extends HasMetadata> T get(String resource, String name, Class<T> type) {
        return api.call("get", resource, name, () -> api.client().resources(type).inNamespace(settings.namespace())
                .withName(name).get());
    }

    /** Deletes what this call made, newest first; a failure here is added to the original one. */
    private void undo(Deque<HasMetadata> made, RuntimeException cause) {
        for (HasMetadata o : made) {
            try {
                String resource = plural(o);
                api.run("delete", resource, o.getMetadata().getName(), () -> api.client().resource(o)
                        .inNamespace(settings.namespace()).withGracePeriod(0).delete());
            } catch (RuntimeException e) {
                cause.addSuppressed(e);
            }
        }
    }

    private static String plural(HasMetadata o) {
        return switch (o.getKind()) {
            case "Pod" -> "pods";
            case "Service" -> "services";
            case "Secret" -> "secrets";
            case "NetworkPolicy" -> "networkpolicies";
            case "PersistentVolumeClaim" -> "persistentvolumeclaims";
            default -> o.getKind().toLowerCase(java.util.Locale.ROOT) + "s";
        };
    }

    private List<String> owned(SandboxId id) {
        Map<String, String> sel = Map.of(Manifests.MANAGED_BY, Manifests.MANAGER, Manifests.SANDBOX_ID, id.value());
        var c = api.client();
        String ns = settings.namespace();
        List<String> names = new ArrayList<>();
        for (List<? extends HasMetadata> l : List.of(
                api.call("list", "pods", "", () -> c.pods().inNamespace(ns).withLabels(sel).list().getItems()),
                api.call("list", "services", "", () -> c.services().inNamespace(ns).withLabels(sel).list().getItems()),
                api.call("list", "secrets", "", () -> c.secrets().inNamespace(ns).withLabels(sel).list().getItems()),
                api.call("list", "persistentvolumeclaims", "", () -> c.persistentVolumeClaims().inNamespace(ns)
                        .withLabels(sel).list().getItems()),
                api.call("list", "networkpolicies", "", () -> c.network().v1().networkPolicies().inNamespace(ns)
                        .withLabels(sel).list().getItems()))) {
            l.forEach(o -> names.add(o.getKind() + "/" + o.getMetadata().getName()));
        }
        return names;
    }

    private String image(LaunchPlan plan) {
        for (String k : plan.options().keySet()) {
            if (!OPTIONS.contains(k)) {
                throw new DriverException(Kind.INVALID, "unknown kubernetes driver option '" + k + "'; known: "
                        + new TreeSet<>(OPTIONS));
            }
        }
        String image = plan.options().get("image");
        if (image != null) {
            return KubernetesSettings.image(image, "option image");
        }
        return settings.workloadImage().orElseThrow(() -> new DriverException(Kind.INVALID,
                "the launch names no image and the driver has no workload.image setting"));
    }

    private static DialDirection direction(LaunchPlan plan) {
        String dial = plan.options().getOrDefault("dial", "runtime");
        return switch (dial) {
            case "runtime" -> DialDirection.RUNTIME_INITIATED;
            case "supervisor" -> DialDirection.SUPERVISOR_INITIATED;
            default -> throw new DriverException(Kind.INVALID, "option dial must be runtime or supervisor, got '" + dial + "'");
        };
    }

    private static String uid(HasMetadata o) {
        return Objects.requireNonNullElse(o.getMetadata().getUid(), "");
    }

    @Override
    public void close() {
        api.client().close();
    }
}
