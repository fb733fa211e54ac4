package openshell.driver.kubernetes;

import java.net.InetAddress;
import java.net.URI;
import java.time.Clock;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodStatusBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.http.BasicBuilder;
import io.fabric8.kubernetes.client.http.HttpRequest;
import io.fabric8.kubernetes.client.http.Interceptor;
import io.fabric8.kubernetes.client.server.mock.KubernetesMixedDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.ServerRequest;
import io.fabric8.mockwebserver.ServerResponse;

/**
 * Test scope only: fabric8's mock API server in CRUD mode (with expectations for injected failures),
 * on loopback, plus the parts of a cluster the mock lacks, played by the test: the Service controller
 * (assigns a ClusterIP) and the scheduler and kubelet (a Pod runs only once it has no scheduling gate;
 * a Pod seen running while gated is recorded as a violation). Every request the driver's client makes
 * is recorded with its body, so tests assert order and the RBAC verbs used.
 */
final class MockCluster implements AutoCloseable {
    static final String NAMESPACE = "sandboxes";

    /** One request the driver made. */
    record Request(String method, String path, String query, String body) {
        /** @return the RBAC resource: the path element after the namespace */
        String resource() {
            String[] p = path.split("/");
            for (int i = 0; i < p.length - 1; i++) {
                if (p[i].equals("namespaces")) {
                    return i + 2 < p.length ? p[i + 2] : "namespaces";
                }
            }
            return path;
        }

        /** @return the RBAC verb this request needs */
        String verb() {
            boolean named = path.split("/").length > indexOfResource() + 1;
            return switch (method) {
                case "GET" -> named ? "get" : (query != null && query.contains("watch=true") ? "watch" : "list");
                case "POST" -> "create";
                case "PUT" -> "update";
                case "PATCH" -> "patch";
                case "DELETE" -> named ? "delete" : "deletecollection";
                default -> method;
            };
        }

        private int indexOfResource() {
            String[] p = path.split("/");
            for (int i = 0; i < p.length; i++) {
                if (p[i].equals("namespaces")) {
                    return i + 2;
                }
            }
            return p.length;
        }
    }

    final KubernetesMockServer server;
    final KubernetesClient admin;
    final List<Request> requests = new CopyOnWriteArrayList<>();
    final List<String> gatedButRunning = new CopyOnWriteArrayList<>();
    final AtomicBoolean assignClusterIps = new AtomicBoolean(true);
    private final Map<ServerRequest, Queue<ServerResponse>> responses = new HashMap<>();
    private final Set<String> started = ConcurrentHashMap.newKeySet();
    private final AtomicInteger nextIp = new AtomicInteger(10);
    private final Thread controller;
    private volatile boolean closed;

    MockCluster() {
        server = new KubernetesMockServer(new Context(), new MockWebServer(), responses,
                new KubernetesMixedDispatcher(responses), false);
        server.init(InetAddress.getLoopbackAddress(), 0);
        admin = server.createClient(b -> b.withHttpClientFactory(new io.fabric8.kubernetes.client.jdkhttp.JdkHttpClientFactory() {
            @Override
            protected void additionalConfig(java.net.http.HttpClient.Builder builder) {
                builder.version(java.net.http.HttpClient.Version.HTTP_1_1);
            }
        }));
        controller = Thread.ofPlatform().daemon().name("mock-cluster-controller").start(this::control);
    }

    URI url() {
        return URI.create(server.url("/"));
    }

    Map<String, String> settings() {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("namespace", NAMESPACE);
        s.put("api.server", url().toString());
        s.put("runtime.image", "registry.example/openshell-sandbox:1");
        s.put("supervisor.image", "registry.example/openshell-supervisor:1");
        s.put("workload.image", "registry.example/agent:1");
        s.put("network-policy-enforced", "true");
        s.put("gateway.id", "gw1");
        return s;
    }

    KubernetesDriver driver() {
        return driver(settings());
    }

    KubernetesDriver driver(Map<String, String> settings) {
        KubernetesSettings parsed = KubernetesSettings.parse(settings);
        Interceptor recorder = new Interceptor() {
            @Override
            public void before(BasicBuilder builder, HttpRequest request, RequestTags tags) {
                requests.add(new Request(request.method(), request.uri().getPath(), request.uri().getQuery(),
                        request.bodyString()));
            }
        };
        return new KubernetesDriver(parsed, KubernetesDriver.client(parsed, b -> b.addOrReplaceInterceptor("record", recorder)),
                Clock.systemUTC());
    }

    /** The controller, scheduler and kubelet the mock lacks, polling until closed. */
    private void control() {
        while (!closed) {
            try {
                if (assignClusterIps.get()) {
                    for (Service s : admin.services().inNamespace(NAMESPACE).list().getItems()) {
                        if (s.getSpec().getClusterIP() == null || s.getSpec().getClusterIP().isEmpty()) {
                            s.getSpec().setClusterIP("10.96.0." + nextIp.getAndIncrement());
                            admin.services().inNamespace(NAMESPACE).resource(s).update();
                        }
                    }
                }
                for (Pod p : admin.pods().inNamespace(NAMESPACE).list().getItems()) {
                    boolean gated = KubernetesDriver.gated(p);
                    String phase = p.getStatus() == null ? null : p.getStatus().getPhase();
                    if (gated && "Running".equals(phase)) {
                        gatedButRunning.add(p.getMetadata().getName());
                    }
                    if (!gated && phase == null && started.add(p.getMetadata().getUid())) {
                        p.setStatus(new PodStatusBuilder().withPhase("Running").withPodIP("10.244.0." + nextIp.getAndIncrement())
                                .build());
                        admin.pods().inNamespace(NAMESPACE).resource(p).update();
                    }
                }
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                // An object deleted between list and update: the next pass sees the new state.
            }
        }
    }

    /** Waits (bounded) until the controller has marked every Pod of the namespace running. */
    void awaitRunning(int pods) throws InterruptedException {
        for (int i = 0; i < 500; i++) {
            long running = admin.pods().inNamespace(NAMESPACE).list().getItems().stream()
                    .filter(p -> p.getStatus() != null && "Running".equals(p.getStatus().getPhase())).count();
            if (running >= pods) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("the mock cluster's controller did not start " + pods + " Pods within 5 s");
    }

    @Override
    public void close() {
        closed = true;
        controller.interrupt();
        try {
            controller.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        admin.close();
        server.destroy();
    }
}
