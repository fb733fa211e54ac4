package openshell.gateway.store;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;

/**
 * A provider as anyone may see it: its name, the environment variable whose placeholder the
 * agent gets, and the hosts the real value may be sent to. The value itself is never part of it.
 *
 * @param name      a lower-case DNS label
 * @param envVar    environment variable name, e.g. {@code GITHUB_TOKEN}
 * @param hosts     the exact host names the credential may be sent to, 1..{@link #MAX_HOSTS}
 * @param createdAt when it was created
 */
public record ProviderRecord(String name, String envVar, List<String> hosts, Instant createdAt) {
    /** Most hosts one provider may be bound to. */
    public static final int MAX_HOSTS = 64;
    /** Largest secret value accepted, in bytes. */
    public static final int MAX_SECRET_BYTES = 8192;
    private static final Pattern NAME = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
    private static final Pattern ENV = Pattern.compile("[A-Z_][A-Z0-9_]{0,127}");
    // Exact host names: the supervisor sends a credential only to the very hosts it is bound to.
    private static final Pattern HOST = Pattern.compile("[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?");

    /** Validates. */
    public ProviderRecord {
        Objects.requireNonNull(createdAt, "createdAt");
        if (name == null || !NAME.matcher(name).matches()) {
            throw new GatewayException(Reason.INVALID, "provider name must be a lower-case DNS label: '" + name + "'");
        }
        if (envVar == null || !ENV.matcher(envVar).matches()) {
            throw new GatewayException(Reason.INVALID, "provider environment variable must match " + ENV.pattern()
                    + ": '" + envVar + "'");
        }
        if (hosts == null || hosts.isEmpty() || hosts.size() > MAX_HOSTS) {
            throw new GatewayException(Reason.INVALID, "a provider is bound to 1.." + MAX_HOSTS + " hosts");
        }
        for (String h : hosts) {
            if (h == null || !HOST.matcher(h).matches() || h.contains("..")) {
                throw new GatewayException(Reason.INVALID, "not an exact host name (no wildcards): '" + h + "'");
            }
        }
        hosts = List.copyOf(hosts);
    }

    /**
     * The placeholder the agent's environment holds instead of the value; the supervisor's format
     * ({@code openshell-credential-<name>}), safe in any header.
     *
     * @return the placeholder
     */
    public String placeholder() {
        return "openshell-credential-" + name;
    }
}
