package openshell.driver.kubernetes;

import java.io.IOException;
import java.util.function.Supplier;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * Every request the driver makes goes through {@link #call}, which names the RBAC verb and resource
 * it needs, so a refusal says exactly what the gateway's Role lacks and an unreachable server is
 * named. The verbs named here are the ones {@code deploy/kubernetes/role.yaml} grants.
 */
final class ClusterApi {
    private final KubernetesClient client;
    private final String namespace;

    ClusterApi(KubernetesClient client, String namespace) {
        this.client = client;
        this.namespace = namespace;
    }

    KubernetesClient client() {
        return client;
    }

    String namespace() {
        return namespace;
    }

    String server() {
        return String.valueOf(client.getMasterUrl());
    }

    /**
     * @param verb     the RBAC verb the request needs ({@code get}, {@code list}, {@code create}, ...)
     * @param resource the RBAC resource ({@code pods}, {@code networkpolicies}, ...)
     * @param name     the object's name, for the message ({@code ""} for a list)
     * @param request  the request
     * @return what it returned
     */
    <T> T call(String verb, String resource, String name, Supplier<T> request) {
        try {
            return request.get();
        } catch (KubernetesClientException e) {
            throw map(verb, resource, name, e);
        }
    }

    void run(String verb, String resource, String name, Runnable request) {
        call(verb, resource, name, () -> {
            request.run();
            return null;
        });
    }

    DriverException map(String verb, String resource, String name, KubernetesClientException e) {
        String what = verb + " " + resource + (name.isEmpty() ? "" : " " + name) + " in namespace " + namespace;
        String said = e.getStatus() != null && e.getStatus().getMessage() != null ? e.getStatus().getMessage() : e.getMessage();
        return switch (e.getCode()) {
            case 403 -> new DriverException(Kind.UNAVAILABLE, "the Kubernetes API server " + server()
                    + " forbids the gateway's service account to " + what + ": its Role needs the verb '" + verb
                    + "' on '" + resource + "' (see deploy/kubernetes/role.yaml)", e);
            case 401 -> new DriverException(Kind.UNAVAILABLE, "the Kubernetes API server " + server()
                    + " refused the gateway's credentials (" + what + ")", e);
            case 409 -> new DriverException(Kind.FAILED, "cannot " + what + ": it already exists or changed meanwhile ("
                    + said + ")", e);
            case 400, 422 -> new DriverException(Kind.FAILED, "the Kubernetes API server " + server() + " rejected "
                    + what + ": " + said, e);
            default -> unreachable(e)
                    ? new DriverException(Kind.UNAVAILABLE, "the Kubernetes API server " + server() + " is unreachable ("
                            + what + "): " + rootMessage(e), e)
                    : new DriverException(Kind.FAILED, "cannot " + what + " on " + server() + ": " + said, e);
        };
    }

    private static boolean unreachable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof IOException) {
                return true;
            }
        }
        return false;
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
    }
}
