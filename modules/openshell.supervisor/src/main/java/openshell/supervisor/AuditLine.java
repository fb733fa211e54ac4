package openshell.supervisor;

import java.io.StringWriter;
import java.net.InetAddress;
import java.time.Instant;

import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonWriter;
import jakarta.json.spi.JsonProvider;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.policy.Decision;

/**
 * Builds the audit line of one decision. Only decision facts go in: never headers, query
 * strings, bodies or credential values, so a line cannot carry a secret.
 */
final class AuditLine {
    /**
     * The JSON provider, looked up once: {@code Json.createObjectBuilder()} and its siblings look
     * the provider up through a ServiceLoader and build a new one on every call: the largest Java
     * cost of a mediated connect in the supervisor (JFR, 2026-11-30; tests/perf/README.md).
     */
    static final JsonProvider JSON = JsonProvider.provider();

    private final JsonObjectBuilder json = JSON.createObjectBuilder();

    private AuditLine(Instant time, String sandbox, String kind, long generation) {
        json.add("time", time.toString()).add("sandbox", sandbox).add("kind", kind).add("generation", generation);
    }

    static AuditLine of(Instant time, String sandbox, String kind, long generation) {
        return new AuditLine(time, sandbox, kind, generation);
    }

    AuditLine decision(Decision d) {
        json.add("decision", d.allowed() ? "allow" : "deny");
        switch (d) {
            case Decision.Allow a -> {
                json.add("rule", a.rule().path()).add("inspection", a.inspection().name());
                // enforcement: audit forwarded what it would deny: the line says so in fields, not only in prose.
                a.wouldDeny().ifPresent(n -> {
                    JsonObjectBuilder would = JSON.createObjectBuilder().add("cause", n.cause().name());
                    n.rule().ifPresent(r -> would.add("rule", r.path()));
                    json.add("enforcement", "audit").add("wouldDeny", would);
                });
            }
            case Decision.Deny n -> {
                json.add("cause", n.cause().name());
                n.rule().ifPresent(r -> json.add("rule", r.path()));
            }
        }
        json.add("reason", d.reason());
        return this;
    }

    /** A decision the supervisor took before or besides the engine (exhausted, upstream failed). */
    AuditLine outcome(String decision, String cause, String reason) {
        json.add("decision", decision).add("cause", cause).add("reason", reason);
        return this;
    }

    AuditLine identity(IdentityResolution who) {
        switch (who) {
            case IdentityResolution.Resolved(BinaryIdentity id) -> {
                json.add("binary", executable(id.executable()));
                JsonArrayBuilder ancestors = JSON.createArrayBuilder();
                id.ancestors().forEach(e -> ancestors.add(executable(e)));
                json.add("ancestors", ancestors);
            }
            case IdentityResolution.Unresolved u -> json.add("identityUnresolved", u.reason());
        }
        return this;
    }

    AuditLine destination(String host, InetAddress address, int port) {
        JsonObjectBuilder d = JSON.createObjectBuilder();
        if (host != null) {
            d.add("host", host);
        }
        if (address != null) {
            d.add("address", address.getHostAddress());
        }
        if (port > 0) {
            d.add("port", port);
        }
        json.add("destination", d);
        return this;
    }

    /** The request's method and target without its query string (which may hold tokens). */
    AuditLine request(String method, String target) {
        int q = target.indexOf('?');
        json.add("method", method).add("path", q < 0 ? target : target.substring(0, q));
        return this;
    }

    AuditLine field(String name, String value) {
        json.add(name, value);
        return this;
    }

    private static JsonObjectBuilder executable(Executable e) {
        JsonObjectBuilder b = JSON.createObjectBuilder().add("path", e.path());
        e.sha256().ifPresent(s -> b.add("sha256", s));
        return b;
    }

    String write() {
        StringWriter out = new StringWriter();
        try (JsonWriter w = JSON.createWriter(out)) {
            w.writeObject(json.build());
        }
        return out.toString();
    }
}
