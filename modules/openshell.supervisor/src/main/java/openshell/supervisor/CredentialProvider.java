package openshell.supervisor;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * A named secret bound to the hosts it may be sent to. The workload only ever sees
 * {@link #placeholder()}; the supervisor puts the value into request headers on admitted requests
 * to a bound host. {@link #toString()} and every error message leave the value out.
 */
final class CredentialProvider {
    /** Longest secret value, in bytes. */
    static final int MAX_SECRET_BYTES = 8192;
    /** Most hosts one provider is bound to. */
    static final int MAX_HOSTS = 64;
    /** Prefix of every placeholder, so a placeholder is recognisable wherever it is sent. */
    static final String PLACEHOLDER_PREFIX = "openshell-credential-";
    private static final Pattern NAME = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");

    private final String name;
    private final byte[] value;
    private final Set<String> hosts;

    private CredentialProvider(String name, byte[] value, Set<String> hosts) {
        this.name = name;
        this.value = value;
        this.hosts = hosts;
    }

    /**
     * @param name  a lower-case DNS label
     * @param value the secret (copied); printable ASCII, no CR, LF or NUL, so it can sit in a header
     * @param hosts the exact host names it may be sent to
     * @return the provider
     */
    static CredentialProvider of(String name, byte[] value, Set<String> hosts) {
        if (name == null || !NAME.matcher(name).matches()) {
            throw new SupervisorException("a credential provider name is a lower-case DNS label: '" + name + "'");
        }
        if (value == null || value.length == 0 || value.length > MAX_SECRET_BYTES) {
            throw new SupervisorException("credential " + name + ": the value must be 1.." + MAX_SECRET_BYTES + " bytes");
        }
        for (byte b : value) {
            if (b < 0x20 || b == 0x7f) {
                // Never echo the value, not even the offending byte's position.
                throw new SupervisorException("credential " + name + ": the value must be printable ASCII");
            }
        }
        if (hosts.isEmpty() || hosts.size() > MAX_HOSTS) {
            throw new SupervisorException("credential " + name + " must be bound to 1.." + MAX_HOSTS + " hosts");
        }
        Set<String> canonical = Set.copyOf(hosts.stream().map(HostAliases::canonical).toList());
        return new CredentialProvider(name, value.clone(), canonical);
    }

    String name() {
        return name;
    }

    /** @return what the agent's environment holds instead of the value */
    String placeholder() {
        return PLACEHOLDER_PREFIX + name;
    }

    boolean boundTo(String host) {
        return host != null && hosts.contains(host.toLowerCase(Locale.ROOT));
    }

    /** The value as header text; only ever written to the upstream socket. */
    String value() {
        return new String(value, StandardCharsets.US_ASCII);
    }

    /** Overwrites the value in memory. */
    void destroy() {
        Arrays.fill(value, (byte) 0);
    }

    @Override
    public String toString() {
        return "CredentialProvider[" + name + ", hosts " + hosts + ", value hidden]";
    }
}
