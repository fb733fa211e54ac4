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
 *
 * <p>A loopback target cannot be handed to the workload as is: inside the sandbox, loopback is the
 * sandbox's own and its connects never leave it. So DNS answers such a name with a stand-in
 * address from the benchmarking ranges (198.18.0.0/15, 2001:2::/48; never routed on the internet),
 * one per alias, which the workload dials and the supervisor maps back to the name and its target.
 */
final class HostAliases {
    /** Most aliases one supervisor accepts. */
    static final int MAX_ALIASES = 256;

    private final Map<String, InetAddress> byName;
    private final Map<String, InetAddress> standIns;

    private HostAliases(Map<String, InetAddress> byName) {
        this.byName = Map.copyOf(byName);
        Map<String, InetAddress> s = new HashMap<>();
        int n = 0;
        for (String name : byName.keySet().stream().sorted().toList()) {
            n++;
            InetAddress target = byName.get(name);
            if (target.isLoopbackAddress()) {
                s.put(name, standIn(target instanceof java.net.Inet6Address, n));
            }
        }
        this.standIns = Map.copyOf(s);
    }

    private static InetAddress standIn(boolean v6, int n) {
        try {
            return v6 ? InetAddress.getByAddress(new byte[] {0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) (n >> 8), (byte) n})
                    : InetAddress.getByAddress(new byte[] {(byte) 198, 18, (byte) (n >> 8), (byte) n});
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException("a 4 or 16 byte address is always valid", e);
        }
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

    /**
     * @param name an aliased name
     * @return the address DNS answers the workload for it: a stand-in when the target is loopback, else the target
     */
    Optional<InetAddress> answerFor(String name) {
        String n = canonical(name);
        return Optional.ofNullable(standIns.getOrDefault(n, byName.get(n)));
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
