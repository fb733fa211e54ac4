package openshell.driver.kubernetes;

import static openshell.driver.StateProperties.required;

import java.util.Properties;

import openshell.driver.DialDirection;
import openshell.driver.DriverException;
import openshell.driver.StateProperties;
import openshell.isolation.BackendKey;
import openshell.isolation.SandboxId;
import openshell.isolation.TopologyDescriptor;

/**
 * What the driver provisioned for one launch, as the descriptor the supervisor's backend reads
 * (both Services, which side dials) and as the state the gateway persists (the namespace, the
 * generation, the UIDs the fence check compares against).
 *
 * @param namespace            the namespace
 * @param id                   the sandbox
 * @param generation           the launch generation
 * @param direction            who dials
 * @param port                 the boundary port
 * @param boundaryAddress      {@code os-boundary-<id>}'s ClusterIP and port (the supervisor dials it when supervisor-initiated)
 * @param supervisorAddress    {@code os-supervisor-<id>}'s ClusterIP and port (the runtime dials it when runtime-initiated)
 * @param boundaryServiceUid   the Service's UID, which must survive every restart
 * @param supervisorServiceUid the Service's UID, likewise
 * @param workloadPolicyUid    the namespace workload policy observed before the Pods were admitted
 * @param supervisorPolicyUid  the namespace supervisor policy, likewise
 * @param pairPolicyUid        the pair's policy, likewise
 * @param workloadPodUid       the workload Pod of this generation
 * @param supervisorPodUid     the supervisor Pod of this generation
 * @param workloadView         {@link Manifests#securityView} of the workload Pod as admitted
 * @param supervisorView       {@link Manifests#securityView} of the supervisor Pod as admitted
 */
record KubernetesTopology(String namespace, SandboxId id, long generation, DialDirection direction, int port,
                          String boundaryAddress, String supervisorAddress, String boundaryServiceUid,
                          String supervisorServiceUid, String workloadPolicyUid, String supervisorPolicyUid,
                          String pairPolicyUid, String workloadPodUid, String supervisorPodUid, String workloadView,
                          String supervisorView) {
    /** The backend that attaches Kubernetes topologies: the sandbox runtime over TCP, protocol version 1. */
    static final BackendKey BACKEND = new BackendKey("openshell-sandbox", 1);

    /** @return the descriptor: the transport, both directions' endpoints and which one is used */
    TopologyDescriptor descriptor() {
        Properties p = new Properties();
        p.setProperty("transport", "tcp");
        p.setProperty("dial", direction == DialDirection.RUNTIME_INITIATED ? "runtime" : "supervisor");
        p.setProperty("namespace", namespace);
        p.setProperty("pair", id.value());
        p.setProperty("listen", "0.0.0.0:" + port);
        p.setProperty("boundary.authority", Manifests.boundaryServiceName(id) + "." + namespace + ".svc:" + port);
        p.setProperty("boundary.address", boundaryAddress);
        p.setProperty("supervisor.authority", Manifests.supervisorServiceName(id) + "." + namespace + ".svc:" + port);
        p.setProperty("supervisor.address", supervisorAddress);
        return TopologyDescriptor.of(BACKEND, StateProperties.write(p));
    }

    byte[] state() {
        Properties p = new Properties();
        p.setProperty("namespace", namespace);
        p.setProperty("id", id.value());
        p.setProperty("generation", Long.toString(generation));
        p.setProperty("direction", direction.name());
        p.setProperty("port", Integer.toString(port));
        p.setProperty("boundary.address", boundaryAddress);
        p.setProperty("supervisor.address", supervisorAddress);
        p.setProperty("boundary.service.uid", boundaryServiceUid);
        p.setProperty("supervisor.service.uid", supervisorServiceUid);
        p.setProperty("policy.workloads.uid", workloadPolicyUid);
        p.setProperty("policy.supervisors.uid", supervisorPolicyUid);
        p.setProperty("policy.pair.uid", pairPolicyUid);
        p.setProperty("workload.pod.uid", workloadPodUid);
        p.setProperty("supervisor.pod.uid", supervisorPodUid);
        p.setProperty("workload.view", workloadView);
        p.setProperty("supervisor.view", supervisorView);
        return StateProperties.write(p);
    }

    static KubernetesTopology fromState(SandboxId expected, byte[] state) {
        try {
            Properties p = StateProperties.read(state);
            KubernetesTopology t = new KubernetesTopology(required(p, "namespace"), new SandboxId(required(p, "id")),
                    Long.parseLong(required(p, "generation")), DialDirection.valueOf(required(p, "direction")),
                    Integer.parseInt(required(p, "port")), required(p, "boundary.address"), required(p, "supervisor.address"),
                    required(p, "boundary.service.uid"), required(p, "supervisor.service.uid"),
                    required(p, "policy.workloads.uid"), required(p, "policy.supervisors.uid"), required(p, "policy.pair.uid"),
                    required(p, "workload.pod.uid"), required(p, "supervisor.pod.uid"), required(p, "workload.view"),
                    required(p, "supervisor.view"));
            if (!t.id().equals(expected)) {
                throw new IllegalArgumentException("it names sandbox " + t.id().value());
            }
            return t;
        } catch (RuntimeException e) {
            throw new DriverException(DriverException.Kind.INVALID, "not a kubernetes-driver state of sandbox "
                    + expected.value() + ": " + e.getMessage(), e);
        }
    }
}
