package openshell.driver.kubernetes;

import java.net.URI;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * The driver's settings from the gateway's trusted configuration, validated once.
 *
 * @param namespace             the namespace every sandbox object lives in
 * @param apiServer             the API server's URL; empty: in-cluster service account or kubeconfig
 * @param runtimeImage          the image holding the sandbox runtime at {@link Manifests#RUNTIME_IMAGE_DIR}
 * @param supervisorImage       the supervisor's image
 * @param workloadImage         the workload image used when a launch names none
 * @param networkPolicyEnforced the operator's statement that the cluster's CNI enforces NetworkPolicy
 * @param boundaryPort          the TCP port of the protocol connection on both Pods
 * @param supervisorUid         the non-root uid (and gid) the supervisor Pod runs as
 * @param gatewayId             labels every object, so one gateway's sweep never touches another's
 */
record KubernetesSettings(String namespace, Optional<URI> apiServer, String runtimeImage, String supervisorImage,
                          Optional<String> workloadImage, boolean networkPolicyEnforced, int boundaryPort,
                          int supervisorUid, String gatewayId) {
    /** The boundary port when none is set. */
    static final int DEFAULT_BOUNDARY_PORT = 7443;
    /** The supervisor's uid when none is set. */
    static final int DEFAULT_SUPERVISOR_UID = 65532;
    /** Longest image reference accepted. */
    static final int MAX_IMAGE_CHARS = 512;
    /** Every setting this driver reads; any other is refused. */
    static final Set<String> KNOWN = Set.of("namespace", "api.server", "runtime.image", "supervisor.image",
            "workload.image", "network-policy-enforced", "boundary.port", "supervisor.uid", "gateway.id");
    private static final Pattern DNS_LABEL = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
    private static final Pattern IMAGE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/:@+-]*");

    static KubernetesSettings parse(Map<String, String> s) {
        for (String key : s.keySet()) {
            if (!KNOWN.contains(key)) {
                throw invalid("unknown kubernetes driver setting '" + key + "'; known: " + sorted());
            }
        }
        String namespace = label(required(s, "namespace"), "namespace");
        Optional<URI> api = Optional.ofNullable(s.get("api.server")).map(KubernetesSettings::apiServer);
        String gatewayId = label(s.getOrDefault("gateway.id", "default"), "gateway.id");
        String enforced = s.getOrDefault("network-policy-enforced", "false");
        if (!enforced.equals("true") && !enforced.equals("false")) {
            throw invalid("network-policy-enforced must be true or false, got '" + enforced + "'");
        }
        int port = integer(s, "boundary.port", DEFAULT_BOUNDARY_PORT, 1024, 65_535);
        int uid = integer(s, "supervisor.uid", DEFAULT_SUPERVISOR_UID, 1, Integer.MAX_VALUE);
        return new KubernetesSettings(namespace, api, image(required(s, "runtime.image"), "runtime.image"),
                image(required(s, "supervisor.image"), "supervisor.image"),
                Optional.ofNullable(s.get("workload.image")).map(v -> image(v, "workload.image")),
                Boolean.parseBoolean(enforced), port, uid, gatewayId);
    }

    static String image(String value, String what) {
        if (value.length() > MAX_IMAGE_CHARS || !IMAGE.matcher(value).matches()) {
            throw invalid(what + " is not an image reference of at most " + MAX_IMAGE_CHARS + " characters: '" + value + "'");
        }
        return value;
    }

    private static URI apiServer(String value) {
        try {
            URI u = new URI(value);
            if (!"https".equals(u.getScheme()) && !"http".equals(u.getScheme()) || u.getHost() == null) {
                throw invalid("api.server must be an http(s) URL with a host, got '" + value + "'");
            }
            return u;
        } catch (java.net.URISyntaxException e) {
            throw invalid("api.server is not a URL: '" + value + "'");
        }
    }

    private static String label(String value, String what) {
        if (!DNS_LABEL.matcher(value).matches()) {
            throw invalid(what + " must be a lower-case DNS label of at most 63 characters, got '" + value + "'");
        }
        return value;
    }

    private static int integer(Map<String, String> s, String key, int fallback, int min, int max) {
        String v = s.get(key);
        if (v == null) {
            return fallback;
        }
        try {
            int n = Integer.parseInt(v);
            if (n < min || n > max) {
                throw invalid(key + " must be in " + min + ".." + max + ", got " + n);
            }
            return n;
        } catch (NumberFormatException e) {
            throw invalid(key + " is not a number: '" + v + "'");
        }
    }

    private static String required(Map<String, String> s, String key) {
        String v = s.get(key);
        if (v == null || v.isBlank()) {
            throw invalid("the kubernetes driver needs the setting '" + key + "'");
        }
        return v;
    }

    private static String sorted() {
        return KNOWN.stream().sorted().toList().toString();
    }

    static DriverException invalid(String message) {
        return new DriverException(Kind.INVALID, message);
    }
}
