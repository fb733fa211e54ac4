package openshell.protocol;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LinkSecurityTest {
    @Test
    void launchMaterialIsOneCaOneLeafForTheSessionName() throws Exception {
        LaunchTls tls = LaunchTls.issue("abc-1");
        X509Certificate leaf = tls.runtime().chain().get(0);
        X509Certificate authority = tls.pin().authority();
        assertEquals("sandbox.abc-1.openshell.internal", tls.runtime().serverName());
        leaf.verify(authority.getPublicKey());
        assertEquals(0, authority.getBasicConstraints(), "the CA may sign leaves only");
        assertEquals(-1, leaf.getBasicConstraints());
        assertTrue(leaf.getSubjectAlternativeNames().stream()
                .anyMatch(name -> "sandbox.abc-1.openshell.internal".equals(name.get(1))));
        assertEquals(Refusal.INVALID_ARGUMENT,
                assertThrows(ProtocolException.class, () -> LaunchTls.issue("Bad_Name")).refusal());
    }

    @Test
    void supervisorRefusesARuntimeOfAnotherLaunch() {
        try (Launch launch = new Launch(Launch.Kind.TCP, Initiator.SUPERVISOR)) {
            LaunchTls other = LaunchTls.issue("session-1");
            SupervisorEndpoint pinnedElsewhere = SupervisorEndpoint.builder()
                    .transport(launch.runtime.listening().orElseThrow())
                    .initiator(Initiator.SUPERVISOR)
                    .pin(other.pin())
                    .tokens(launch.slot)
                    .build();
            ProtocolException refused = assertThrows(ProtocolException.class, pinnedElsewhere::connect);
            assertEquals(Refusal.TRANSPORT_FAILED, refused.refusal());
        }
    }

    @Test
    void unixPeerOfAnotherUserIsRefusedBeforeTls() throws Exception {
        Path directory = Files.createTempDirectory("osp");
        Path socket = directory.resolve("p.sock");
        LaunchTls tls = LaunchTls.issue("session-1");
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "k", Clock.systemUTC());
        AtomicReference<UnixPeer> seen = new AtomicReference<>();
        UnixPeerPolicy recordThenRefuse = peer -> {
            seen.set(peer);
            throw new ProtocolException(Refusal.PEER_REFUSED, "test policy admits nobody");
        };
        try (RuntimeEndpoint runtime = RuntimeEndpoint.builder()
                .transport(Transport.unix(socket))
                .initiator(Initiator.SUPERVISOR)
                .identity(tls.runtime())
                .verifier(TokenVerifier.builder().key(issuer.verificationKey()).issuer(Launch.ISSUER)
                        .audience(TokenAudience.SANDBOX).sandboxId(Launch.SANDBOX)
                        .runtimeGeneration(Launch.GENERATION).build())
                .peerPolicy(recordThenRefuse)
                .addService(new TestRuntime(Launch.GENERATION, Clock.systemUTC()))
                .build()
                .start()) {
            SupervisorEndpoint supervisor = SupervisorEndpoint.builder()
                    .transport(runtime.listening().orElseThrow())
                    .initiator(Initiator.SUPERVISOR)
                    .pin(tls.pin())
                    .tokens(new TokenSlot(issuer.mintPair(Launch.grant(), 1), Clock.systemUTC()))
                    .build();
            assertThrows(ProtocolException.class, supervisor::connect);
            // SO_PEERCRED named this very process's user: the check ran on real kernel data.
            assertEquals(System.getProperty("user.name"), seen.get().user());
            assertEquals(Refusal.PEER_REFUSED, assertThrows(ProtocolException.class,
                    () -> UnixPeerPolicy.user("somebody-else").check(seen.get())).refusal());
        } finally {
            Files.deleteIfExists(socket);
            Files.deleteIfExists(directory);
        }
    }

    /**
     * A runtime that gives the link up right after TLS (its handshake timeout passed while a cold
     * supervisor was slow) fails the supervisor's connect as TRANSPORT_FAILED, the refusal its
     * callers answer by taking the runtime's next dial, not with Helidon's own exception.
     */
    @Test
    void aLinkClosedRightAfterTlsIsATransportFailure() throws Exception {
        LaunchTls tls = LaunchTls.issue("session-1");
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "k", Clock.systemUTC());
        try (java.nio.channels.ServerSocketChannel server = java.nio.channels.ServerSocketChannel.open()
                .bind(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0))) {
            Thread runtime = Thread.ofVirtual().start(() -> {
                try (ChannelSocket socket = new ChannelSocket(server.accept())) {
                    LinkSecurity.serve(tls.runtime().sslContext(), tls.runtime().serverName(), socket).close();
                } catch (IOException e) {
                    // the supervisor saw it fail either way
                }
            });
            SupervisorEndpoint supervisor = dialing(server, tls, issuer);
            ProtocolException refused = assertThrows(ProtocolException.class, supervisor::connect);
            assertEquals(Refusal.TRANSPORT_FAILED, refused.refusal(), refused.toString());
            runtime.join(java.time.Duration.ofSeconds(30));
        }
    }

    /**
     * A peer that finishes TLS with the launch's own identity and then never speaks HTTP/2 is
     * not a link: connect waits for its SETTINGS no longer than the handshake bound and fails.
     */
    @Test
    void aPeerSilentAfterTlsFailsAtTheHandshakeBound() throws Exception {
        LaunchTls tls = LaunchTls.issue("session-1");
        TokenIssuer issuer = TokenIssuer.generate(Launch.ISSUER, "k", Clock.systemUTC());
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        try (java.nio.channels.ServerSocketChannel server = java.nio.channels.ServerSocketChannel.open()
                .bind(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0))) {
            Thread runtime = Thread.ofVirtual().start(() -> {
                try (ChannelSocket socket = new ChannelSocket(server.accept())) {
                    var quiet = LinkSecurity.serve(tls.runtime().sslContext(), tls.runtime().serverName(), socket);
                    done.await();
                    quiet.close();
                } catch (IOException | InterruptedException e) {
                    // the supervisor saw it fail either way
                }
            });
            SupervisorEndpoint supervisor = dialing(server, tls, issuer);
            long start = System.nanoTime();
            ProtocolException refused = assertThrows(ProtocolException.class, supervisor::connect);
            long waitedMillis = (System.nanoTime() - start) / 1_000_000;
            done.countDown();
            assertEquals(Refusal.TRANSPORT_FAILED, refused.refusal(), refused.toString());
            assertTrue(refused.getMessage().contains("did not start HTTP/2"), refused.getMessage());
            assertTrue(waitedMillis >= ProtocolLimits.HANDSHAKE_TIMEOUT.toMillis(),
                    "gave up after " + waitedMillis + " ms, before the bound");
            runtime.join(java.time.Duration.ofSeconds(30));
        }
    }

    private static SupervisorEndpoint dialing(java.nio.channels.ServerSocketChannel server, LaunchTls tls, TokenIssuer issuer)
            throws IOException {
        return SupervisorEndpoint.builder()
                .transport(Transport.tcp((java.net.InetSocketAddress) server.getLocalAddress()))
                .initiator(Initiator.SUPERVISOR)
                .pin(tls.pin())
                .tokens(new TokenSlot(issuer.mintPair(Launch.grant(), 1), Clock.systemUTC()))
                .build();
    }
}
