package openshell.policy;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Finds the endpoints whose host matches a destination without scanning them all: exact names
 * and IP literals in hash maps, wildcard patterns in a hash map keyed by their literal suffix, so
 * a lookup costs one probe per label of the name plus the patterns sharing a suffix with it.
 */
final class EndpointIndex {
    private static final NetworkModel.Endpoint[] NONE = new NetworkModel.Endpoint[0];

    private final Map<String, NetworkModel.Endpoint[]> exact;
    private final Map<String, NetworkModel.Endpoint[]> wildcard;
    private final Map<InetAddress, NetworkModel.Endpoint[]> ip;
    /** Lengths of the wildcard suffixes: a suffix of another length is not looked up (no substring, no hash). */
    private final java.util.BitSet suffixLengths = new java.util.BitSet();

    EndpointIndex(List<NetworkModel.Block> blocks) {
        Map<String, List<NetworkModel.Endpoint>> e = new HashMap<>();
        Map<String, List<NetworkModel.Endpoint>> w = new HashMap<>();
        Map<InetAddress, List<NetworkModel.Endpoint>> a = new HashMap<>();
        for (NetworkModel.Block b : blocks) {
            for (NetworkModel.Endpoint ep : b.endpoints()) {
                switch (ep.host) {
                    case HostNames.Exact x -> e.computeIfAbsent(x.name(), k -> new ArrayList<>()).add(ep);
                    case HostNames.Wildcard x -> w.computeIfAbsent(x.suffix(), k -> new ArrayList<>()).add(ep);
                    case HostNames.Ip x -> a.computeIfAbsent(x.address(), k -> new ArrayList<>()).add(ep);
                }
            }
        }
        exact = freeze(e);
        wildcard = freeze(w);
        w.keySet().forEach(k -> suffixLengths.set(k.length()));
        ip = freeze(a);
    }

    private static <K> Map<K, NetworkModel.Endpoint[]> freeze(Map<K, List<NetworkModel.Endpoint>> m) {
        Map<K, NetworkModel.Endpoint[]> out = new HashMap<>(Math.max(16, m.size() * 2));
        m.forEach((k, v) -> out.put(k, v.toArray(NONE)));
        return Map.copyOf(out);
    }

    /**
     * @param host    canonical host name, or null
     * @param address the address, or null
     * @param port    the port, or 0 for any port
     * @return the matching endpoints in document order
     */
    List<NetworkModel.Endpoint> candidates(String host, InetAddress address, int port) {
        List<NetworkModel.Endpoint> out = new ArrayList<>(4);
        int sources = 0;
        if (host != null) {
            sources += add(exact.get(host), port, out);
            if (!wildcard.isEmpty()) {
                for (int dot = host.indexOf('.'); dot >= 0; dot = host.indexOf('.', dot + 1)) {
                    if (!suffixLengths.get(host.length() - dot - 1)) {
                        continue;
                    }
                    NetworkModel.Endpoint[] ws = wildcard.get(host.substring(dot + 1));
                    if (ws != null) {
                        int before = out.size();
                        for (NetworkModel.Endpoint ep : ws) {
                            if ((port == 0 || ep.hasPort(port)) && ((HostNames.Wildcard) ep.host).matches(host)) {
                                out.add(ep);
                            }
                        }
                        sources += out.size() > before ? 1 : 0;
                    }
                }
            }
        }
        // As upstream: an IP endpoint matches a connection dialled to that address, never a name
        // that happens to resolve to it.
        if (address != null && host == null && !ip.isEmpty()) {
            sources += add(ip.get(address), port, out);
        }
        if (sources > 1) {
            out.sort(Comparator.comparingInt(ep -> ep.ordinal));
        }
        return out;
    }

    private static int add(NetworkModel.Endpoint[] eps, int port, List<NetworkModel.Endpoint> out) {
        if (eps == null) {
            return 0;
        }
        int before = out.size();
        for (NetworkModel.Endpoint ep : eps) {
            if (port == 0 || ep.hasPort(port)) {
                out.add(ep);
            }
        }
        return out.size() > before ? 1 : 0;
    }
}
