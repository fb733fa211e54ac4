package openshell.isolation;

import java.net.InetAddress;

/**
 * A port on the boundary's own loopback interface. Anything else is rejected when the target is
 * made, so a port forward can never become a way to reach another host.
 *
 * @param address a loopback address
 * @param port    1..65535
 */
public record LoopbackTarget(InetAddress address, int port) {
    /** Rejects non-loopback addresses and bad ports. */
    public LoopbackTarget {
        BackendException.require(address, "address");
        if (!address.isLoopbackAddress()) {
            throw new BackendException(BackendException.Kind.INVALID,
                    "port forwards reach loopback only, not " + address.getHostAddress());
        }
        if (port < 1 || port > 65535) {
            throw BackendException.invalid("port out of range: " + port);
        }
    }

    /**
     * @param port 1..65535
     * @return the port on 127.0.0.1
     */
    public static LoopbackTarget of(int port) {
        return new LoopbackTarget(InetAddress.getLoopbackAddress(), port);
    }
}
