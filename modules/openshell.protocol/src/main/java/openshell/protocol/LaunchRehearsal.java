package openshell.protocol;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;

import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;

/**
 * A rehearsal of a launch's cold code, for a warm spare while it waits for its sandbox (it runs
 * niced, before any create needs it). Where the certificate builder is linked (the supervisor's
 * image, not the sandbox's, which never mints), a throwaway launch is minted and both its bundles parsed,
 * the runtime's TLS server and the supervisor's pinned client shake hands in memory and exchange a
 * record, the runtime's verifier checks the supervisor's token, and {@code SO_PEERCRED} is read on
 * a throwaway Unix socket. Each is the code a real launch then runs first on its critical path
 * (protobuf, X.509, EC keys and signatures, the TLS 1.3 handshake, JWT verification, the foreign
 * function linker), which would otherwise run interpreted or be linked then. Every key is made
 * here and dropped here; nothing leaves the process or outlives the call. Without the builder,
 * the primitives alone: an X25519 agreement, an ECDSA signature, AES-GCM. Every launch, spare or
 * not, first gets {@link #primeAhead()}: class initialisation only, beside its main thread.
 */
public final class LaunchRehearsal {
    private static final int RECORD_ROUNDS = 64;

    private LaunchRehearsal() {
    }

    /**
     * Runs the rehearsal.
     *
     * @throws ProtocolException if any step fails (a caller that only warms up may ignore it)
     */
    public static void run() {
        if (ModuleLayer.boot().findModule("org.bouncycastle.pkix").isEmpty()) {
            // The sandbox image links no certificate builder (it never mints): the crypto alone.
            crypto();
            return;
        }
        String sandbox = "rehearsal";
        TokenIssuer issuer = TokenIssuer.generate("openshell-gateway", "rehearsal-key", Clock.systemUTC());
        LaunchBundles.Minted minted = LaunchBundles.mint(LaunchBundles.Request.builder().sandboxId(sandbox)
                .sessionId("rehearsal-" + Long.toHexString(System.nanoTime())).generation(1)
                .policyYaml("version: 1\nnetwork_policies: {}\n")
                .agent(new LaunchBundles.Agent(List.of("/bin/true"), Map.of(), "/"))
                .workload(1000, 1000).build(), issuer, 1);
        RuntimeBundle runtime = LaunchBundles.runtimeBundle(minted.runtimeBundle());
        SupervisorBundle supervisor = LaunchBundles.supervisorBundle(minted.supervisorBundle());
        runtime.verifier().verify(supervisor.tokens().sandboxToken());
        try {
            handshake(runtime.identity().sslContext().createSSLEngine(),
                    supervisor.pin().sslContext().createSSLEngine(supervisor.pin().serverName(), 443));
        } catch (SSLException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the rehearsal's handshake failed: " + e.getMessage(), e);
        }
        if (PeerCredentials.available()) {
            peerCredentials();
        }
    }

    /**
     * Starts, on a daemon thread of its own, the class initialisation a cold launch meets first:
     * the logging back end (JNA's first use looks it up, and that lookup opens every jar of the
     * module path), the launch bundle's messages (protobuf descriptors), the EC key and curve
     * tables and the X.509 factory (the bundle's keys and certificates), the TLS 1.3 context
     * class, and Helidon's gRPC routing and HTTP/2 configuration. Why: a cold program runs all
     * of these one after another on its main thread (~250 ms of a runtime's way to serving on
     * this project's 2-core machines), while its first ~100 ms are JNA's own start-up on that
     * thread; so the second core does them meanwhile, and the main thread later finds them done
     * (or waits on a class's initialisation lock; nothing runs twice). No key, secret or bundle is
     * touched (nothing is generated, parsed or kept), so it may start before a bundle is read. A
     * failure only leaves less warm: the launch runs the same code and reports its own errors.
     *
     * @return the started thread (it ends by itself)
     */
    public static Thread primeAhead() {
        return Thread.ofPlatform().daemon().name(PRIME_THREAD).start(LaunchRehearsal::prime);
    }

    /** The name of {@link #primeAhead()}'s thread. */
    static final String PRIME_THREAD = "launch-prime";

    /** @return what failed, if anything did (then less is warm; nothing else changes) */
    static java.util.Optional<Throwable> prime() {
        try {
            System.getLogger(LaunchRehearsal.class.getName()).isLoggable(System.Logger.Level.DEBUG);
            openshell.protocol.wire.RuntimeBundle.getDefaultInstance();
            java.security.KeyFactory.getInstance("EC");
            java.security.AlgorithmParameters curve = java.security.AlgorithmParameters.getInstance("EC");
            curve.init(new java.security.spec.ECGenParameterSpec("secp256r1"));
            java.security.cert.CertificateFactory.getInstance("X.509");
            javax.net.ssl.SSLContext.getInstance(LinkSecurity.TLS_PROTOCOL);
            io.helidon.webserver.grpc.GrpcRouting.builder();
            io.helidon.webserver.http2.Http2Config.builder();
            return java.util.Optional.empty();
        } catch (java.security.GeneralSecurityException | RuntimeException | LinkageError e) {
            // Only a warm-up: the launch runs the same code and reports its own failures.
            return java.util.Optional.of(e);
        }
    }

    /**
     * The primitives a launch's TLS 1.3 handshake and its tokens use, with throwaway keys: an
     * X25519 agreement, an ECDSA P-256 signature and its check, AES-GCM both ways.
     */
    static void crypto() {
        try {
            java.security.KeyPairGenerator x25519 = java.security.KeyPairGenerator.getInstance("X25519");
            java.security.KeyPair a = x25519.generateKeyPair();
            java.security.KeyPair b = x25519.generateKeyPair();
            javax.crypto.KeyAgreement agreement = javax.crypto.KeyAgreement.getInstance("X25519");
            agreement.init(a.getPrivate());
            agreement.doPhase(b.getPublic(), true);
            byte[] secret = agreement.generateSecret();
            java.security.KeyPairGenerator ec = java.security.KeyPairGenerator.getInstance("EC");
            ec.initialize(new java.security.spec.ECGenParameterSpec("secp256r1"));
            java.security.KeyPair signer = ec.generateKeyPair();
            java.security.Signature sign = java.security.Signature.getInstance("SHA256withECDSA");
            sign.initSign(signer.getPrivate());
            sign.update(secret);
            byte[] signature = sign.sign();
            java.security.Signature check = java.security.Signature.getInstance("SHA256withECDSA");
            check.initVerify(signer.getPublic());
            check.update(secret);
            javax.crypto.spec.SecretKeySpec key = new javax.crypto.spec.SecretKeySpec(secret, 0, 16, "AES");
            javax.crypto.spec.GCMParameterSpec iv = new javax.crypto.spec.GCMParameterSpec(128, new byte[12]);
            javax.crypto.Cipher seal = javax.crypto.Cipher.getInstance("AES/GCM/NoPadding");
            seal.init(javax.crypto.Cipher.ENCRYPT_MODE, key, iv);
            byte[] sealed = seal.doFinal(signature);
            javax.crypto.Cipher open = javax.crypto.Cipher.getInstance("AES/GCM/NoPadding");
            open.init(javax.crypto.Cipher.DECRYPT_MODE, key, iv);
            if (!check.verify(signature) || !java.util.Arrays.equals(signature, open.doFinal(sealed))) {
                throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the rehearsal's crypto disagreed with itself");
            }
        } catch (java.security.GeneralSecurityException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the rehearsal's crypto failed: " + e.getMessage(), e);
        }
    }

    /** Both ends in memory: each wrap's output is the other's unwrap input. */
    private static void handshake(SSLEngine server, SSLEngine client) throws SSLException {
        server.setUseClientMode(false);
        client.setUseClientMode(true);
        int packet = Math.max(server.getSession().getPacketBufferSize(), client.getSession().getPacketBufferSize());
        int application = Math.max(server.getSession().getApplicationBufferSize(), client.getSession().getApplicationBufferSize());
        ByteBuffer toServer = ByteBuffer.allocate(packet);
        ByteBuffer toClient = ByteBuffer.allocate(packet);
        ByteBuffer serverIn = ByteBuffer.allocate(application);
        ByteBuffer clientIn = ByteBuffer.allocate(application);
        ByteBuffer serverOut = ByteBuffer.wrap(new byte[] {1});
        ByteBuffer clientOut = ByteBuffer.wrap(new byte[] {2});
        client.beginHandshake();
        server.beginHandshake();
        for (int round = 0; round < RECORD_ROUNDS && (clientIn.position() == 0 || serverIn.position() == 0); round++) {
            step(client, clientOut, toServer, toClient, clientIn);
            step(server, serverOut, toClient, toServer, serverIn);
        }
        if (clientIn.position() == 0 || serverIn.position() == 0) {
            throw new SSLException("no application record crossed within " + RECORD_ROUNDS + " rounds");
        }
    }

    private static void step(SSLEngine engine, ByteBuffer out, ByteBuffer outbound, ByteBuffer inbound, ByteBuffer in)
            throws SSLException {
        SSLEngineResult.HandshakeStatus status = engine.getHandshakeStatus();
        while (status == SSLEngineResult.HandshakeStatus.NEED_TASK) {
            for (Runnable task; (task = engine.getDelegatedTask()) != null; ) {
                task.run();
            }
            status = engine.getHandshakeStatus();
        }
        engine.wrap(out, outbound);
        inbound.flip();
        engine.unwrap(inbound, in);
        inbound.compact();
        for (Runnable task; (task = engine.getDelegatedTask()) != null; ) {
            task.run();
        }
    }

    private static void peerCredentials() {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("openshell-rehearsal");
            Path socket = dir.resolve("s");
            try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                server.bind(UnixDomainSocketAddress.of(socket));
                try (SocketChannel client = SocketChannel.open(UnixDomainSocketAddress.of(socket));
                     SocketChannel accepted = server.accept()) {
                    if (!client.isConnected() || PeerCredentials.pid(accepted) != ProcessHandle.current().pid()) {
                        throw new ProtocolException(Refusal.PEER_REFUSED, "the rehearsal read another peer than itself");
                    }
                }
            }
        } catch (IOException e) {
            throw new ProtocolException(Refusal.TRANSPORT_FAILED, "the rehearsal's Unix socket failed: " + e.getMessage(), e);
        } finally {
            if (dir != null) {
                try {
                    Files.deleteIfExists(dir.resolve("s"));
                    Files.deleteIfExists(dir);
                } catch (IOException ignored) {
                    // a temporary directory left behind holds nothing
                }
            }
        }
    }
}
