package openshell.supervisor;

import java.net.InetAddress;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * Operator-declared host aliases from trusted configuration (never from a policy): a name mapped
 * to an address, host loopback included, so a local service can be offered on purpose while the
 * policy, the Host check and TLS still see the name. An aliased address skips the address-class
 * refusals because the operator chose it.
 */
final class HostAliases {
    /** Most aliases one supervisor accepts. */
    static final int MAX_ALIASES = 256;

    private final Map<String, InetAddress> byName;

    private HostAliases(Map<String, InetAddress> byName) {
        this.byName = Map.copyOf(byName);
    }

    static HostAliases none() {
        return new HostAliases(Map.of());
    }

    /**
     * @param aliases name to address
     * @return the aliases
     * @throws SupervisorException if a name is not a DNS name or there are too many
     */
    static HostAliases of(Map<String, InetAddress> aliases) {
        if (aliases.size() > MAX_ALIASES) {
            throw new SupervisorException("at most " + MAX_ALIASES + " host aliases, got " + aliases.size());
        }
        Map<String, InetAddress> m = new HashMap<>();
        aliases.forEach((name, address) -> m.put(canonical(name), address));
        return new HostAliases(m);
    }

    Optional<InetAddress> lookup(String name) {
        return Optional.ofNullable(byName.get(canonical(name)));
    }

    static String canonical(String name) {
        String n = name.toLowerCase(Locale.ROOT);
        if (n.endsWith(".")) {
            n = n.substring(0, n.length() - 1);
        }
        if (n.isEmpty() || n.length() > 253 || !n.matches("[a-z0-9_]([a-z0-9_-]{0,62})(\\.[a-z0-9_]([a-z0-9_-]{0,62}))*")) {
            throw new SupervisorException("not a DNS host name: '" + name + "'");
        }
        return n;
    }
}
