package openshell.tests.conformance;

/** The Python probe programs (argv after {@code -c}), each small and self-contained. */
final class Probes {
    /**
     * Tries every path around mediation this runtime could have missed; exit 0 if any got out.
     * A path that fails with an error is what must happen; one that does not fail got out.
     */
    static final String DIRECT_EGRESS = """
            import socket, sys, errno
            host, port = sys.argv[1], int(sys.argv[2])
            out = []
            def attempt(name, action):
                try:
                    action()
                    out.append(name)
                    print(name, 'GOT OUT')
                except OSError as e:
                    print(name, 'refused', errno.errorcode.get(e.errno, e.errno))
            def raw():
                s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
                s.sendto(b'x' * 20, (host, 0))
            def packet():
                socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            def udp():
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (host, port))
            def fastopen():
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.sendto(b'x', 0x20000000, (host, port))
            def v6mapped():
                s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                s.settimeout(5)
                s.connect(('::ffff:' + host, port))
                s.close()
            attempt('raw', raw)
            attempt('packet', packet)
            attempt('udp', udp)
            attempt('fastopen', fastopen)
            attempt('v6mapped', v6mapped)
            sys.exit(0 if out else 1)
            """;

    /**
     * One DNS query (type A, UDP) to the resolver of /etc/resolv.conf; exit 0 when any response
     * arrived. A resolver that is not on loopback (the workload's view is 127.0.0.53) is never
     * asked: exit 3, so a missing view fails the check instead of querying the host's resolver.
     */
    static final String DNS_QUERY = """
            import socket, struct, sys
            name = sys.argv[1]
            server = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]
            if not server.startswith('127.'):
                sys.exit(3)
            q = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)
            q += b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\\0' + struct.pack('>HH', 1, 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(60)
            s.sendto(q, (server, 53))
            data = s.recv(4096)
            sys.exit(0 if data[:2] == q[:2] else 2)
            """;

    /** Listens on loopback, prints the port, echoes one connection until the peer half-closes. */
    static final String LOOPBACK_ECHO = """
            import socket, sys
            s = socket.socket()
            s.bind(('127.0.0.1', 0))
            s.listen(1)
            print('listening', s.getsockname()[1], flush=True)
            c, _ = s.accept()
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
            c.close()
            """;

    private Probes() {
    }
}
