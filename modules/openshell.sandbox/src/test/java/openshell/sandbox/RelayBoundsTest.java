package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.channels.ServerSocketChannel;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.PendingTcpOpen;
import openshell.linux.ChildExit;
import openshell.linux.ResourceLimit;
import org.junit.jupiter.api.Test;

/** The relay's bounds and its one-peer rule. */
class RelayBoundsTest {

    @Test
    void aRelayListenerAcceptsOnlyTheExpectedPeerAndClosesAnIntruder() throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 4);
            try (Socket intruder = new Socket(InetAddress.getLoopbackAddress(), server.socket().getLocalPort());
                 Socket expected = new Socket(InetAddress.getLoopbackAddress(), server.socket().getLocalPort())) {
                intruder.setSoTimeout((int) TestSandbox.WAIT.toMillis());
                try (Socket accepted = TcpOpen.acceptExpected(server, (InetSocketAddress) expected.getLocalSocketAddress())) {
                    assertEquals(expected.getLocalSocketAddress(), accepted.getRemoteSocketAddress());
                    assertNotSame(intruder.getLocalSocketAddress(), accepted.getRemoteSocketAddress());
                    assertEquals(-1, intruder.getInputStream().read(), "the intruder is closed without a byte");
                }
            }
        }
    }

    @Test
    void openRelaysAreBoundedAndTheNextAllowFailsTheConnectWithEagain() throws Exception {
        int total = NetworkBroker.MAX_RELAYS + 1;
        ConcurrentLinkedQueue<ByteChannel> open = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<BackendException.Kind> refused = new ConcurrentLinkedQueue<>();
        try (TestSandbox sandbox = new TestSandbox()) {
            Thread supervisor = Thread.ofPlatform().daemon(true).start(() -> {
                while (open.size() + refused.size() < total) {
                    Optional<PendingTcpOpen> next;
                    try {
                        next = sandbox.broker.acceptTcp(TestSandbox.WAIT);
                    } catch (BackendException e) {
                        return;
                    }
                    try {
                        next.ifPresent(p -> open.add(p.allow()));
                    } catch (BackendException e) {
                        refused.add(e.kind());
                    }
                }
            });
            TestSandbox.Outcome outcome = sandbox.run(sandbox.python(String.join("\n",
                    "import socket, errno",
                    "kept = []; results = []",
                    "for i in range(" + total + "):",
                    "    s = socket.socket(); kept.append(s)",
                    "    results.append(errno.errorcode.get(s.connect_ex(('10.20.30.40', 80)), 'OK'))",
                    "print(results.count('OK'), results[-1])"))
                    .rlimits(List.of(new ResourceLimit(ResourceLimit.NOFILE, 4096, 4096))).build());
            supervisor.join(TestSandbox.WAIT.toMillis());
            assertEquals(new ChildExit(0, 0), outcome.exit(), outcome.toString());
            assertEquals(NetworkBroker.MAX_RELAYS + " EAGAIN", outcome.output().trim());
            assertEquals(List.of(BackendException.Kind.UNAVAILABLE), List.copyOf(refused));
            assertEquals(NetworkBroker.MAX_RELAYS, sandbox.broker.openRelayCount());
            open.forEach(ByteChannel::close);
            assertEquals(0, sandbox.broker.openRelayCount(), "closing a channel frees its slot");
        }
    }
}
