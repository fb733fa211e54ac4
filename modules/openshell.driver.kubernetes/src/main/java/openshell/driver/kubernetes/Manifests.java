package openshell.driver.kubernetes;

import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.LabelSelectorBuilder;
import io.fabric8.kubernetes.api.model.ObjectMeta;
import io.fabric8.kubernetes.api.model.ObjectMetaBuilder;
import io.fabric8.kubernetes.api.model.PersistentVolumeClaim;
import io.fabric8.kubernetes.api.model.PersistentVolumeClaimBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.PodSecurityContextBuilder;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.SecurityContextBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeBuilder;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyPortBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicySpec;
import openshell.driver.DialDirection;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.isolation.SandboxId;
import openshell.isolation.WorkloadIdentity;

/**
 * Every object the driver writes, built from trusted settings and one launch, and the projection of
 * a live Pod onto the fields the fence depends on. Pure: no client, so each manifest is asserted
 * field by field without a server.
 */
final class Manifests {
    /** Marks an object this project made (the same key and value the container drivers use). */
    static final String MANAGED_BY = "openshell.ai/managed-by";
    /** The value of {@link #MANAGED_BY}. */
    static final String MANAGER = "openshell";
    /** The sandbox an object belongs to. */
    static final String SANDBOX_ID = "openshell.ai/sandbox-id";
    /** Pairs a sandbox's workload and supervisor (the sandbox id). */
    static final String PAIR = "openshell.ai/boundary-pair";
    /** What a Pod is to its pair: {@link #WORKLOAD} or {@link #SUPERVISOR}. */
    static final String ROLE = "openshell.ai/boundary-role";
    /** The gateway that made an object; a sweep touches only its own. */
    static final String GATEWAY_ID = "openshell.ai/gateway-id";
    /** The launch generation an object was made for. */
    static final String GENERATION = "openshell.ai/runtime-generation";
    /** What an object is: pod, service, secret, policy, workspace. */
    static final String COMPONENT = "openshell.ai/component";
    static final String WORKLOAD = "workload";
    static final String SUPERVISOR = "supervisor";
    /** The scheduling gate both Pods are created with; the driver removes it once all is ready. */
    static final String BOOTSTRAP_GATE = "openshell.ai/bootstrap";
    /** The namespace-wide policy that fences every workload Pod. */
    static final String WORKLOAD_POLICY = "openshell-sandbox-workloads";
    /** The namespace-wide policy that lets every supervisor Pod reach out. */
    static final String SUPERVISOR_POLICY = "openshell-sandbox-supervisors";
    /** Where the runtime image keeps the sandbox runtime the init container copies. */
    static final String RUNTIME_IMAGE_DIR = "/opt/openshell-sandbox";
    /** Where the workload Pod sees the copied runtime (read-only for the workload container). */
    static final String RUNTIME_DIR = "/.openshell/runtime";
    /** Where the workload Pod sees its runtime Secret. */
    static final String RUNTIME_BUNDLE_DIR = "/.openshell/bundle";
    /** Where the supervisor Pod sees its Secret. */
    static final String SUPERVISOR_BUNDLE_DIR = "/.openshell/supervisor";
    /** The key of the launch bundle in both Secrets. */
    static final String BUNDLE_KEY = "bundle";
    /** The supervisor program in its image. */
    static final String SUPERVISOR_LAUNCHER = "/opt/openshell-supervisor/bin/openshell-supervisor";
    /** The workspace mount in the workload Pod. */
    static final String WORKSPACE_DIR = "/sandbox";
    /** The workspace volume's size request. */
    static final String WORKSPACE_SIZE = "1Gi";
    /** The supervisor's admin port (readiness). */
    static final int SUPERVISOR_ADMIN_PORT = 8081;
    /** Seconds between the supervisor's readiness probes. */
    static final int READINESS_PERIOD_SECONDS = 1;
    /** Mode of the bundle files: owner and group read. */
    static final int BUNDLE_FILE_MODE = 0440;
    /** Longest sandbox id: {@code os-supervisor-} plus the id must be a 63-character Service name. */
    static final int MAX_SANDBOX_ID_CHARS = 63 - "os-supervisor-".length();

    private final KubernetesSettings settings;

    Manifests(KubernetesSettings settings) {
        this.settings = Objects.requireNonNull(settings);
    }

    static void requireNameable(SandboxId id) {
        if (id.value().length() > MAX_SANDBOX_ID_CHARS) {
            throw new DriverException(Kind.INVALID, "sandbox id '" + id.value() + "' is longer than the "
                    + MAX_SANDBOX_ID_CHARS + " characters a Kubernetes Service name leaves for it");
        }
    }

    static String workloadPodName(SandboxId id) {
        return "os-sandbox-" + id.value();
    }

    static String supervisorPodName(SandboxId id) {
        return "os-supervisor-" + id.value();
    }

    static String boundaryServiceName(SandboxId id) {
        return "os-boundary-" + id.value();
    }

    static String supervisorServiceName(SandboxId id) {
        return "os-supervisor-" + id.value();
    }

    static String pairPolicyName(SandboxId id) {
        return "os-pair-" + id.value();
    }

    static String workspaceClaimName(SandboxId id) {
        return "os-workspace-" + id.value();
    }

    static String runtimeSecretName(SandboxId id, long generation) {
        return "os-sandbox-" + id.value() + "-g" + generation;
    }

    static String supervisorSecretName(SandboxId id, long generation) {
        return "os-supervisor-" + id.value() + "-g" + generation;
    }

    Map<String, String> labels(SandboxId id, String component) {
        Map<String, String> m = new LinkedHashMap<>();
        m.put(MANAGED_BY, MANAGER);
        m.put(GATEWAY_ID, settings.gatewayId());
        m.put(SANDBOX_ID, id.value());
        m.put(PAIR, id.value());
        m.put(COMPONENT, component);
        return m;
    }

    private Map<String, String> podLabels(SandboxId id, String role, long generation) {
        Map<String, String> m = labels(id, "pod");
        m.put(ROLE, role);
        m.put(GENERATION, Long.toString(generation));
        return m;
    }

    private ObjectMeta meta(String name, Map<String, String> labels) {
        return new ObjectMetaBuilder().withName(name).withNamespace(settings.namespace()).withLabels(labels).build();
    }

    /** Workloads: both policy types, no egress and no ingress; a pair's own policy opens its one port. */
    NetworkPolicy workloadPolicy() {
        return new NetworkPolicyBuilder().withMetadata(meta(WORKLOAD_POLICY, namespaceLabels()))
                .withSpec(workloadPolicySpec()).build();
    }

    NetworkPolicySpec workloadPolicySpec() {
        return new NetworkPolicyBuilder().withNewSpec()
                .withPodSelector(selector(Map.of(MANAGED_BY, MANAGER, ROLE, WORKLOAD)))
                .withPolicyTypes("Ingress", "Egress").withIngress(List.of()).withEgress(List.of()).endSpec()
                .build().getSpec();
    }

    /** Supervisors: every egress (the gateway, DNS, the mediated upstreams), so default-deny namespaces work. */
    NetworkPolicy supervisorPolicy() {
        return new NetworkPolicyBuilder().withMetadata(meta(SUPERVISOR_POLICY, namespaceLabels()))
                .withSpec(supervisorPolicySpec()).build();
    }

    NetworkPolicySpec supervisorPolicySpec() {
        return new NetworkPolicyBuilder().withNewSpec()
                .withPodSelector(selector(Map.of(MANAGED_BY, MANAGER, ROLE, SUPERVISOR)))
                .withPolicyTypes("Egress").addNewEgress().endEgress().endSpec().build().getSpec();
    }

    /**
     * One pair: each of its two Pods may reach the other on the boundary port, in and out, and nothing
     * else is opened (policies add up: the workload stays without any other route).
     */
    NetworkPolicy pairPolicy(SandboxId id) {
        return new NetworkPolicyBuilder().withMetadata(meta(pairPolicyName(id), labels(id, "policy")))
                .withSpec(pairPolicySpec(id)).build();
    }

    NetworkPolicySpec pairPolicySpec(SandboxId id) {
        LabelSelector pair = selector(Map.of(MANAGED_BY, MANAGER, PAIR, id.value()));
        return new NetworkPolicyBuilder().withNewSpec().withPodSelector(pair).withPolicyTypes("Ingress", "Egress")
                .addNewIngress().addNewFrom().withPodSelector(pair).endFrom()
                .withPorts(new NetworkPolicyPortBuilder().withProtocol("TCP").withPort(new IntOrString(settings.boundaryPort())).build())
                .endIngress()
                .addNewEgress().addNewTo().withPodSelector(pair).endTo()
                .withPorts(new NetworkPolicyPortBuilder().withProtocol("TCP").withPort(new IntOrString(settings.boundaryPort())).build())
                .endEgress().endSpec().build().getSpec();
    }

    private Map<String, String> namespaceLabels() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put(MANAGED_BY, MANAGER);
        m.put(COMPONENT, "fence");
        return m;
    }

    private static LabelSelector selector(Map<String, String> labels) {
        return new LabelSelectorBuilder().withMatchLabels(new LinkedHashMap<>(new java.util.TreeMap<>(labels))).build();
    }

    /** {@code os-boundary-<id>}: the workload's boundary port, which a supervisor-initiated launch dials. */
    Service boundaryService(SandboxId id) {
        return service(boundaryServiceName(id), id, WORKLOAD);
    }

    /** {@code os-supervisor-<id>}: the supervisor's listener, which a runtime-initiated launch dials. */
    Service supervisorService(SandboxId id) {
        return service(supervisorServiceName(id), id, SUPERVISOR);
    }

    private Service service(String name, SandboxId id, String role) {
        return new ServiceBuilder().withMetadata(meta(name, labels(id, "service"))).withNewSpec()
                .withType("ClusterIP").withSelector(serviceSelector(id, role))
                .addNewPort().withName("boundary").withProtocol("TCP").withPort(settings.boundaryPort())
                .withTargetPort(new IntOrString(settings.boundaryPort())).endPort().endSpec().build();
    }

    static Map<String, String> serviceSelector(SandboxId id, String role) {
        return new LinkedHashMap<>(Map.of(PAIR, id.value(), ROLE, role));
    }

    PersistentVolumeClaim workspace(SandboxId id) {
        return new PersistentVolumeClaimBuilder().withMetadata(meta(workspaceClaimName(id), labels(id, "workspace")))
                .withNewSpec().withAccessModes("ReadWriteOnce").withNewResources()
                .addToRequests("storage", new Quantity(WORKSPACE_SIZE)).endResources().endSpec().build();
    }

    /** The runtime's Secret: only what the sandbox runtime may see, immutable, one per generation. */
    Secret runtimeSecret(SandboxId id, long generation, byte[] bundle) {
        return secret(runtimeSecretName(id, generation), id, generation, WORKLOAD, bundle);
    }

    /** The supervisor's Secret: mounted only by the supervisor Pod, never by the workload. */
    Secret supervisorSecret(SandboxId id, long generation, byte[] bundle) {
        return secret(supervisorSecretName(id, generation), id, generation, SUPERVISOR, bundle);
    }

    private Secret secret(String name, SandboxId id, long generation, String role, byte[] bundle) {
        Map<String, String> labels = labels(id, "secret");
        labels.put(ROLE, role);
        labels.put(GENERATION, Long.toString(generation));
        return new SecretBuilder().withMetadata(meta(name, labels)).withType("Opaque").withImmutable(true)
                .addToData(BUNDLE_KEY, Base64.getEncoder().encodeToString(bundle)).build();
    }

    /**
     * The workload Pod: the user's image with the runtime copied in by a trusted init container, gated
     * until the driver has checked everything, non-root, no capability, RuntimeDefault seccomp, no
     * service-account token, no host namespace.
     */
    Pod workloadPod(SandboxId id, long generation, String image, WorkloadIdentity who, DialDirection direction,
                    String supervisorAddress) {
        List<String> command = new ArrayList<>(List.of(RUNTIME_DIR + "/bin/openshell-sandbox", "--sandbox", id.value(),
                "--generation", Long.toString(generation), "--bundle-file", RUNTIME_BUNDLE_DIR + "/" + BUNDLE_KEY,
                "--workspace", WORKSPACE_DIR));
        if (direction == DialDirection.RUNTIME_INITIATED) {
            command.addAll(List.of("--channel", "tcp:" + supervisorAddress));
        } else {
            command.addAll(List.of("--listen", "tcp:0.0.0.0:" + settings.boundaryPort()));
        }
        Container install = new ContainerBuilder().withName("runtime-install").withImage(settings.runtimeImage())
                .withCommand("cp", "-a", RUNTIME_IMAGE_DIR + "/.", RUNTIME_DIR + "/")
                .withSecurityContext(containerSecurity(true))
                .withVolumeMounts(mount("runtime", RUNTIME_DIR, false)).build();
        Container workload = new ContainerBuilder().withName(WORKLOAD).withImage(image).withCommand(command)
                .withSecurityContext(containerSecurity(false))
                .addNewPort().withName("boundary").withProtocol("TCP").withContainerPort(settings.boundaryPort()).endPort()
                .withVolumeMounts(mount("runtime", RUNTIME_DIR, true), mount("bundle", RUNTIME_BUNDLE_DIR, true),
                        mount("workspace", WORKSPACE_DIR, false)).build();
        return new PodBuilder().withMetadata(meta(workloadPodName(id), podLabels(id, WORKLOAD, generation))).withNewSpec()
                .withRestartPolicy("Never").withAutomountServiceAccountToken(false).withEnableServiceLinks(false)
                .withHostNetwork(false).withHostPID(false).withHostIPC(false)
                .withSecurityContext(podSecurity(who.uid(), who.gid()))
                .addNewSchedulingGate().withName(BOOTSTRAP_GATE).endSchedulingGate()
                .withInitContainers(install).withContainers(workload)
                .withVolumes(new VolumeBuilder().withName("runtime").withNewEmptyDir().endEmptyDir().build(),
                        secretVolume("bundle", runtimeSecretName(id, generation)),
                        new VolumeBuilder().withName("workspace").withNewPersistentVolumeClaim()
                                .withClaimName(workspaceClaimName(id)).endPersistentVolumeClaim().build())
                .endSpec().build();
    }

    /**
     * The supervisor Pod {@code os-supervisor-<id>}: non-root, read-only root, no capability, a readiness
     * probe, never restarted in place (a new generation is a new Pod), gated like the workload.
     */
    Pod supervisorPod(SandboxId id, long generation, DialDirection direction, String boundaryAddress) {
        List<String> command = new ArrayList<>(List.of(SUPERVISOR_LAUNCHER, "--sandbox", id.value(), "--generation",
                Long.toString(generation), "--bundle-file", SUPERVISOR_BUNDLE_DIR + "/" + BUNDLE_KEY));
        if (direction == DialDirection.RUNTIME_INITIATED) {
            command.addAll(List.of("--listen", "tcp:0.0.0.0:" + settings.boundaryPort()));
        } else {
            command.addAll(List.of("--channel", "tcp:" + boundaryAddress));
        }
        Container supervisor = new ContainerBuilder().withName(SUPERVISOR).withImage(settings.supervisorImage())
                .withCommand(command).withSecurityContext(containerSecurity(true))
                .addNewPort().withName("boundary").withProtocol("TCP").withContainerPort(settings.boundaryPort()).endPort()
                .addNewPort().withName("admin").withProtocol("TCP").withContainerPort(SUPERVISOR_ADMIN_PORT).endPort()
                .withNewReadinessProbe().withPeriodSeconds(READINESS_PERIOD_SECONDS).withNewHttpGet().withPath("/readyz")
                .withPort(new IntOrString(SUPERVISOR_ADMIN_PORT)).endHttpGet().endReadinessProbe()
                .withVolumeMounts(mount("bundle", SUPERVISOR_BUNDLE_DIR, true), mount("tmp", "/tmp", false)).build();
        return new PodBuilder().withMetadata(meta(supervisorPodName(id), podLabels(id, SUPERVISOR, generation))).withNewSpec()
                .withRestartPolicy("Never").withAutomountServiceAccountToken(false).withEnableServiceLinks(false)
                .withHostNetwork(false).withHostPID(false).withHostIPC(false)
                .withSecurityContext(podSecurity(settings.supervisorUid(), settings.supervisorUid()))
                .addNewSchedulingGate().withName(BOOTSTRAP_GATE).endSchedulingGate()
                .withContainers(supervisor)
                .withVolumes(secretVolume("bundle", supervisorSecretName(id, generation)),
                        new VolumeBuilder().withName("tmp").withNewEmptyDir().withMedium("Memory").endEmptyDir().build())
                .endSpec().build();
    }

    private static PodSecurityContext podSecurity(long uid, long gid) {
        return new PodSecurityContextBuilder().withRunAsNonRoot(true).withRunAsUser(uid).withRunAsGroup(gid)
                .withFsGroup(gid).withNewSeccompProfile().withType("RuntimeDefault").endSeccompProfile().build();
    }

    private static SecurityContext containerSecurity(boolean readOnlyRoot) {
        return new SecurityContextBuilder().withPrivileged(false).withAllowPrivilegeEscalation(false)
                .withReadOnlyRootFilesystem(readOnlyRoot).withRunAsNonRoot(true)
                .withCapabilities(new Capabilities(List.of(), List.of("ALL")))
                .withNewSeccompProfile().withType("RuntimeDefault").endSeccompProfile().build();
    }

    private static VolumeMount mount(String name, String path, boolean readOnly) {
        return new io.fabric8.kubernetes.api.model.VolumeMountBuilder().withName(name).withMountPath(path)
                .withReadOnly(readOnly).build();
    }

    private static Volume secretVolume(String name, String secret) {
        return new VolumeBuilder().withName(name).withNewSecret().withSecretName(secret).withDefaultMode(BUNDLE_FILE_MODE)
                .endSecret().build();
    }

    /**
     * The fields of a Pod the fence rests on, in a form two Pods compare by: what the driver wrote is
     * compared with what the API server holds, so a Pod changed or replaced behind the driver's back
     * (another image, a host namespace, a capability, another Secret mounted) is seen.
     *
     * @param pod a Pod as written or as read back
     * @return its security-relevant fields, ignoring the server's defaults for fields the driver leaves unset
     */
    static String securityView(Pod pod) {
        PodSpec s = pod.getSpec();
        StringBuilder b = new StringBuilder();
        b.append("hostNetwork=").append(Boolean.TRUE.equals(s.getHostNetwork()))
                .append(" hostPID=").append(Boolean.TRUE.equals(s.getHostPID()))
                .append(" hostIPC=").append(Boolean.TRUE.equals(s.getHostIPC()))
                .append(" token=").append(s.getAutomountServiceAccountToken())
                .append(" restart=").append(s.getRestartPolicy());
        PodSecurityContext ps = s.getSecurityContext();
        b.append(" pod[").append(ps == null ? "none" : ps.getRunAsNonRoot() + "," + ps.getRunAsUser() + ","
                + ps.getRunAsGroup() + "," + (ps.getSeccompProfile() == null ? null : ps.getSeccompProfile().getType())).append(']');
        List<Container> all = new ArrayList<>(s.getInitContainers() == null ? List.of() : s.getInitContainers());
        all.addAll(s.getContainers() == null ? List.of() : s.getContainers());
        for (Container c : all) {
            SecurityContext cs = c.getSecurityContext();
            b.append(" container[").append(c.getName()).append(',').append(c.getImage()).append(',').append(c.getCommand());
            if (cs == null) {
                b.append(",none");
            } else {
                Capabilities caps = cs.getCapabilities();
                b.append(',').append(cs.getPrivileged()).append(',').append(cs.getAllowPrivilegeEscalation()).append(',')
                        .append(cs.getReadOnlyRootFilesystem()).append(',')
                        .append(caps == null ? null : caps.getDrop()).append(',').append(caps == null ? null : caps.getAdd());
            }
            b.append(",mounts=");
            for (VolumeMount m : c.getVolumeMounts() == null ? List.<VolumeMount>of() : c.getVolumeMounts()) {
                b.append(m.getName()).append(':').append(m.getMountPath()).append(':').append(Boolean.TRUE.equals(m.getReadOnly())).append(';');
            }
            b.append(']');
        }
        for (Volume v : s.getVolumes() == null ? List.<Volume>of() : s.getVolumes()) {
            b.append(" volume[").append(v.getName()).append(',');
            if (v.getSecret() != null) {
                b.append("secret=").append(v.getSecret().getSecretName());
            } else if (v.getEmptyDir() != null) {
                b.append("emptyDir");
            } else if (v.getPersistentVolumeClaim() != null) {
                b.append("claim=").append(v.getPersistentVolumeClaim().getClaimName());
            } else {
                b.append("other");
            }
            b.append(']');
        }
        return b.toString();
    }
}
