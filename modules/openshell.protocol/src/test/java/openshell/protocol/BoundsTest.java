package openshell.protocol;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.UpdateProviderEnvironmentRequest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BoundsTest {
    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void unauthenticatedFloodDoesNotStopAnAuthenticatedCaller(Launch.Kind kind) throws IOException {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR)) {
            Transport where = launch.runtime.listening().orElseThrow();
            List<SocketChannel> flood = new ArrayList<>();
            try {
                for (int i = 0; i < ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS + 1; i++) {
                    flood.add(where.dial());
                }
                try (SupervisorLink link = launch.link()) {
                    assertEquals(Launch.GENERATION,
                            Launch.blocking(link).attach(Launch.attachRequest("a")).getRuntimeGeneration());
                }
                assertTrue(launch.runtime.census().preAuthCount() <= ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS);
            } finally {
                for (SocketChannel channel : flood) {
                    channel.close();
                }
            }
        }
    }

    @Test
    void idleConnectionIsClosedAtTheHandshakeTimeout() throws IOException {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR)) {
            InetSocketAddress address = ((Transport.Tcp) launch.runtime.listening().orElseThrow()).address();
            try (Socket idle = new Socket(address.getAddress(), address.getPort())) {
                idle.setSoTimeout((int) ProtocolLimits.HANDSHAKE_TIMEOUT.plusSeconds(15).toMillis());
                long start = System.nanoTime();
                assertEquals(-1, idle.getInputStream().read(), "the runtime closes, never sends");
                Duration open = Duration.ofNanos(System.nanoTime() - start);
                assertTrue(open.compareTo(ProtocolLimits.HANDSHAKE_TIMEOUT.minusMillis(500)) >= 0, "closed after " + open);
                assertTrue(open.compareTo(ProtocolLimits.HANDSHAKE_TIMEOUT.plusSeconds(5)) <= 0, "closed after " + open);
            }
        }
    }

    @Test
    void censusEvictsTheOldestAtThePreAuthBoundAndRefusesPastTheControlBound() {
        LinkCensus census = new LinkCensus(ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS, ProtocolLimits.MAX_CONTROL_CONNECTIONS);
        List<ServedLink> links = new ArrayList<>();
        for (int i = 0; i < ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS; i++) {
            ServedLink link = stub();
            links.add(link);
            assertTrue(census.admit(link).isEmpty(), "no eviction up to the bound");
        }
        ServedLink newest = stub();
        assertEquals(links.get(0), census.admit(newest).orElseThrow(), "past the bound the oldest goes");
        assertEquals(ProtocolLimits.MAX_PRE_AUTH_CONNECTIONS, census.preAuthCount());

        LinkCensus control = new LinkCensus(ProtocolLimits.MAX_CONTROL_CONNECTIONS + 1,
                ProtocolLimits.MAX_CONTROL_CONNECTIONS);
        for (int i = 0; i < ProtocolLimits.MAX_CONTROL_CONNECTIONS; i++) {
            ServedLink link = stub();
            control.admit(link);
            assertTrue(control.promote(link));
        }
        ServedLink extra = stub();
        control.admit(extra);
        assertFalse(control.promote(extra), "one past the control bound is refused");
        assertEquals(ProtocolLimits.MAX_CONTROL_CONNECTIONS, control.controlCount());
    }

    @Test
    void controlMessageAtTheBoundPassesAndOneByteMoreIsRefused() {
        try (Launch launch = new Launch(Launch.Kind.UNIX, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            UpdateProviderEnvironmentRequest atBound = sized(ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES, "at");
            assertEquals(ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES, atBound.getSerializedSize());
            assertEquals(9, Launch.blocking(link).updateProviderEnvironment(atBound).getAppliedEpoch());

            UpdateProviderEnvironmentRequest over = sized(ProtocolLimits.MAX_CONTROL_MESSAGE_BYTES + 1, "over");
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                    () -> Launch.blocking(link).updateProviderEnvironment(over));
            assertEquals(Status.Code.CANCELLED, refused.getStatus().getCode());
            assertTrue(refused.getStatus().getDescription().contains("exceeds"));
        }
    }

    private static UpdateProviderEnvironmentRequest sized(int size, String id) {
        int length = size - 100;
        for (int attempt = 0; attempt < 10; attempt++) {
            UpdateProviderEnvironmentRequest request = RequestDigest.stamp(UpdateProviderEnvironmentRequest.newBuilder()
                    .setCredentialEpoch(9).putEnvironment("BLOB", "x".repeat(length)).build(), id);
            int actual = request.getSerializedSize();
            if (actual == size) {
                return request;
            }
            length += size - actual;
        }
        throw new AssertionError("cannot size a request to " + size);
    }

    private static ServedLink stub() {
        // Census bookkeeping only: a link object that never serves.
        return new ServedLink(null, null);
    }

    @Test
    void aUnixSocketPathAtTheBoundListensAndOneByteMoreIsRefusedByName(@TempDir Path directory) throws IOException {
        String prefix = directory.toString() + "/";
        Path atBound = Path.of(prefix + "a".repeat(ProtocolLimits.MAX_UNIX_SOCKET_PATH_BYTES - prefix.length()));
        try (ServerSocketChannel server = Transport.unix(atBound).listen();
                SocketChannel client = Transport.unix(atBound).dial()) {
            assertTrue(client.isConnected() && server.isOpen());
        }
        Path over = Path.of(atBound + "b");
        ProtocolException refused = assertThrows(ProtocolException.class, () -> Transport.unix(over));
        assertEquals(Refusal.INVALID_ARGUMENT, refused.refusal());
        assertTrue(refused.getMessage().contains((ProtocolLimits.MAX_UNIX_SOCKET_PATH_BYTES + 1) + " bytes"),
                refused.getMessage());
        assertTrue(refused.getMessage().contains(over.toString()), refused.getMessage());
        assertFalse(Files.exists(over), "nothing was created");
    }
}
