package openshell.isolation;

import java.net.InetAddress;

/**
 * Where the workload asked to connect, exactly as it asked (an address, never a name: names were
 * resolved, and pinned, by the DNS plane).
 *
 * @param address the address
 * @param port    1..65535
 */
public record TcpDestination(InetAddress address, int port) {
    /** Validates. */
    public TcpDestination {
        BackendException.require(address, "address");
        if (port < 1 || port > 65535) {
            throw BackendException.invalid("port out of range: " + port);
        }
    }
}
