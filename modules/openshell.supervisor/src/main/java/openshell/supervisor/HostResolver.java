package openshell.supervisor;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;

/**
 * How the supervisor resolves a name on the host side. The system resolver is the product's;
 * another resolver is trusted configuration (tests use one that names loopback servers).
 */
@FunctionalInterface
interface HostResolver {
    /**
     * @param name a canonical DNS name
     * @return its addresses
     * @throws UnknownHostException if the name does not exist (not retried)
     * @throws IOException          on a transient failure (retried with bounded backoff)
     */
    List<InetAddress> resolve(String name) throws IOException;

    /** @return the host's resolver ({@link InetAddress#getAllByName}) */
    static HostResolver system() {
        return name -> List.of(InetAddress.getAllByName(name));
    }
}
