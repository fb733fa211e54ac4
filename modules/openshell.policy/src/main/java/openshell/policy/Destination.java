package openshell.policy;

import java.net.InetAddress;
import java.util.Objects;
import java.util.Optional;

/**
 * Where a connection goes: the host name the workload resolved (when it resolved one through the
 * supervisor's DNS plane, which pinned the answer), the address, and the port. Built only through
 * the factories, which say how far the address may be trusted.
 */
public final class Destination {
    private final String host;
    private final InetAddress address;
    private final int port;
    private final boolean aliased;

    private Destination(String host, InetAddress address, int port, boolean aliased) {
        if (port < 1 || port > 65535) {
            throw new PolicyException("port out of range: " + port);
        }
        this.host = host;
        this.address = address;
        this.port = port;
        this.aliased = aliased;
    }

    /**
     * A name that resolved (through the supervisor) to the address.
     *
     * @param host    the DNS name (case and one trailing dot are folded)
     * @param address the address it resolved to; its class is checked
     * @param port    1..65535
     * @return the destination
     */
    public static Destination of(String host, InetAddress address, int port) {
        return new Destination(name(host), Objects.requireNonNull(address, "address"), port, false);
    }

    /**
     * An address the workload dialled without a name; only IP-literal endpoints can match it.
     *
     * @param address the address; its class is checked
     * @param port    1..65535
     * @return the destination
     */
    public static Destination of(InetAddress address, int port) {
        return new Destination(null, Objects.requireNonNull(address, "address"), port, false);
    }

    /**
     * A name the operator mapped to an address in trusted gateway configuration (never policy):
     * the address-class refusals do not apply, because the operator offers it on purpose.
     *
     * @param host    the DNS name
     * @param address the operator's address for it, loopback included
     * @param port    1..65535
     * @return the destination
     */
    public static Destination aliased(String host, InetAddress address, int port) {
        return new Destination(name(host), Objects.requireNonNull(address, "address"), port, true);
    }

    /**
     * A name with no address yet, for {@code policy explain}: the address-class check is then
     * the caller's, after resolution, with {@link AddressClass#permits}.
     *
     * @param host the DNS name
     * @param port 1..65535
     * @return the destination
     */
    public static Destination unresolved(String host, int port) {
        return new Destination(name(host), null, port, false);
    }

    private static String name(String host) {
        Objects.requireNonNull(host, "host");
        String canonical = HostNames.canonical(host);
        if (canonical == null || HostNames.ipLiteral(host) != null) {
            throw new PolicyException("not a DNS host name: '" + host + "'");
        }
        return canonical;
    }

    /** @return the canonical host name, if the destination has one */
    public Optional<String> host() {
        return Optional.ofNullable(host);
    }

    /** @return the address, unless the destination is {@linkplain #unresolved unresolved} */
    public Optional<InetAddress> address() {
        return Optional.ofNullable(address);
    }

    /** @return the port */
    public int port() {
        return port;
    }

    /** @return whether the address comes from an operator's alias */
    public boolean aliased() {
        return aliased;
    }

    String hostOrNull() {
        return host;
    }

    InetAddress addressOrNull() {
        return address;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Destination d && Objects.equals(d.host, host) && Objects.equals(d.address, address)
                && d.port == port && d.aliased == aliased;
    }

    @Override
    public int hashCode() {
        return Objects.hash(host, address, port, aliased);
    }

    @Override
    public String toString() {
        String where = host == null ? (address == null ? "?" : address.getHostAddress())
                : address == null ? host : host + "/" + address.getHostAddress();
        return where + ":" + port + (aliased ? " (operator alias)" : "");
    }
}
