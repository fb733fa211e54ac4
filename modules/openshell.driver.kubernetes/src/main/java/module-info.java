/**
 * The Kubernetes compute driver ({@code kubernetes}): each sandbox is a workload Pod and a supervisor
 * Pod {@code os-supervisor-<id>} in one namespace, paired by labels, speaking the Sandbox Protocol as
 * TLS over TCP through two Services: {@code os-boundary-<id>} (the workload's port, which the
 * supervisor dials when a launch is supervisor-initiated) and {@code os-supervisor-<id>} (the
 * supervisor's listener, which the runtime dials: the default). The sandbox runtime is the TLS server
 * in both directions. Pods do not share a kernel, so there is no descriptor lane: decisions and relay
 * bytes travel on the one TLS connection.
 *
 * <h2>The fence</h2>
 * Two namespace-wide NetworkPolicies are created when absent and read back (UID, resourceVersion,
 * exactly the driver's spec) before any Pod of a sandbox is admitted: {@code openshell-sandbox-workloads}
 * (every workload Pod: both policy types, no ingress and {@code egress: []}) and
 * {@code openshell-sandbox-supervisors} (every supervisor Pod: all egress, so a default-deny namespace
 * does not cut it off). Each pair gets {@code os-pair-<id>}, which opens only the boundary port between
 * its own two Pods, in and out; policies add up, so a workload reaches nothing else, and no other
 * sandbox's supervisor reaches it. A policy that differs from the driver's is never overwritten: the
 * create is refused. Creates are refused unless the operator sets {@code network-policy-enforced=true}
 * after checking that the cluster's CNI enforces NetworkPolicy: without enforcement there is no fence.
 *
 * <h2>What a launch provisions</h2>
 * In order: the two Services (first, and last deleted: a sandbox with objects but no boundary Service
 * is an interrupted create or delete, which the orphan sweep removes), the workspace claim, the pair
 * policy, two immutable Secrets of this generation split by trust domain ({@code os-sandbox-<id>-g<N>}
 * holds only the runtime's bundle and is the only Secret the workload Pod mounts;
 * {@code os-supervisor-<id>-g<N>} holds the supervisor's and is mounted only by the supervisor Pod),
 * then both Pods with the scheduling gate {@code openshell.ai/bootstrap}. The driver reads both Pods
 * back, checks that they are still gated and that every security field is as it wrote it, observes
 * the namespace policies once more, and only then removes the gates. Anything failing on the way
 * removes what this call made, newest first.
 *
 * <p>The workload Pod runs the user's image with the sandbox runtime copied from the runtime image by
 * a trusted init container into an emptyDir mounted read-only; non-root (the launch's workload uid
 * and gid), no privilege escalation, {@code drop ALL}, RuntimeDefault seccomp, no service-account
 * token, no service links, no host namespaces, never restarted. The supervisor Pod: non-root, read-only
 * root file system, {@code drop ALL}, a readiness probe on {@code /readyz}, {@code restartPolicy: Never}
 * (a new generation is a new Pod). Every object is labelled {@code openshell.ai/managed-by},
 * {@code sandbox-id}, {@code boundary-pair}, {@code boundary-role}, {@code gateway-id},
 * {@code component} (and Pods and Secrets {@code runtime-generation}).
 *
 * <h2>Lifecycle</h2>
 * Stop deletes the supervisor Pod, then the workload Pod, then that generation's Secrets; it deletes
 * only the Pod UIDs its state recorded, so a stale stop never removes a restarted supervisor. The
 * Services, the pair policy and the workspace stay. Start checks that both Services are the ones
 * recorded (UID, selector; their ClusterIP is reused) and launches the next generation. Delete removes
 * everything labelled with the sandbox's and this gateway's ids, whatever the state or the supervisor.
 * Status re-checks the fence (both namespace policies present with the driver's spec, the pair policy
 * the one recorded and unchanged, each Pod the recorded UID with unchanged security fields); a
 * violation deletes both Pods and is reported with the reason, which the gateway records as FAILED.
 *
 * <h2>Settings</h2>
 * {@code namespace} (required), {@code runtime.image} and {@code supervisor.image} (required),
 * {@code workload.image}, {@code network-policy-enforced} ({@code false}), {@code boundary.port}
 * ({@code 7443}), {@code supervisor.uid} ({@code 65532}), {@code gateway.id} ({@code default}) and
 * {@code api.server} (else the in-cluster service account or kubeconfig). Launch options:
 * {@code image}, {@code dial} ({@code runtime} or {@code supervisor}).
 *
 * <p>fabric8's jars are automatic modules named from their file names; the driver uses the JDK's HTTP
 * client ({@code kubernetes-httpclient-jdk}, HTTP/1.1 over cleartext), not Vert.x. A module path
 * holding this module needs every fabric8 jar on the module path too: Maven's surefire puts jars without a module name on the
 * class path unless the tested module itself requires them, and the boot layer then cannot resolve
 * this module (which is why {@code tests/descriptors} reads descriptors from the class path). fabric8
 * logs through SLF4J, routed to {@code java.util.logging} ({@code slf4j-jdk14}, runtime scope).
 *
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code Manifests.MAX_SANDBOX_ID_CHARS}</td><td>49 characters (63 minus {@code os-supervisor-})</td><td>create refused (INVALID), nothing made</td></tr>
 * <tr><td>{@code KubernetesSettings.MAX_IMAGE_CHARS}</td><td>512</td><td>INVALID</td></tr>
 * <tr><td>{@code KubernetesDriver.CONNECT_TIMEOUT}</td><td>5 s</td><td>UNAVAILABLE naming the API server</td></tr>
 * <tr><td>{@code KubernetesDriver.REQUEST_TIMEOUT}</td><td>30 s per request</td><td>UNAVAILABLE naming the API server</td></tr>
 * <tr><td>{@code KubernetesDriver.REQUEST_RETRIES}</td><td>0</td><td>the first failure is reported</td></tr>
 * <tr><td>{@code KubernetesDriver.SERVICE_ADDRESS_WAIT}</td><td>10 s for a ClusterIP</td><td>create FAILED, everything removed</td></tr>
 * <tr><td>{@code KubernetesDriver.ORPHAN_GRACE}</td><td>5 min</td><td>younger objects without a boundary Service are left to their create</td></tr>
 * <tr><td>{@code Manifests.READINESS_PERIOD_SECONDS}</td><td>1 s</td><td>supervisor readiness probe period</td></tr>
 * <tr><td>{@code Manifests.BUNDLE_FILE_MODE}</td><td>0440</td><td>mode of the mounted bundle files</td></tr>
 * <tr><td>{@code Manifests.WORKSPACE_SIZE}</td><td>1Gi</td><td>the workspace claim's request</td></tr>
 * </table>
 */
// fabric8 publishes no module names: its jars are automatic modules, named from their file names.
@SuppressWarnings("requires-automatic")
module openshell.driver.kubernetes {
    requires openshell.driver;
    requires java.net.http;
    requires kubernetes.client.api;
    requires kubernetes.model.common;
    requires kubernetes.model.core;
    requires kubernetes.model.networking;
    // Implementations fabric8 loads reflectively and through its own service files.
    requires kubernetes.client;
    requires io.fabric8.kubernetes.client.jdkhttp;

    provides openshell.driver.spi.ComputeDriverProvider with openshell.driver.kubernetes.KubernetesDriverProvider;
}
