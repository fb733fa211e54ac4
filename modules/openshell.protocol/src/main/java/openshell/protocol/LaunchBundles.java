package openshell.protocol;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.interfaces.ECPublicKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.X509EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.UnknownFieldSet;

import openshell.protocol.wire.AgentLaunch;
import openshell.protocol.wire.HostAlias;
import openshell.protocol.wire.ProviderCredential;
import openshell.protocol.wire.ResolverEndpoint;
import openshell.protocol.wire.VerificationKey;

/**
 * Mints and reads the launch bundles of one launch: the gateway calls {@link #mint} once per
 * launch and hands the two byte arrays to the compute driver, which writes each to its program's
 * standard input; each main reads its own with {@link #read}, parses it with
 * {@link #runtimeBundle(byte[])} or {@link #supervisorBundle(byte[])}, and zeroes the bytes.
 * The split is the point: the runtime bundle carries only the runtime's TLS identity, the
 * gateway's public key, ids, the workload's uid/gid and its confinement (the policy's static
 * sections, {@link WorkloadConfinement}); tokens, the policy itself and credentials go to the
 * supervisor only.
 * Every malformed bundle is refused with {@link Refusal#BUNDLE_INVALID} and a message that
 * names the field but never a secret.
 */
public final class LaunchBundles {
    /** Largest bundle minted or read, in bytes; a larger one is refused. */
    public static final int MAX_BUNDLE_BYTES = 1 << 20;
    /** The {@code format} of a runtime bundle; anything else is refused. */
    public static final int RUNTIME_FORMAT = 1;
    /** The {@code format} of a supervisor bundle; anything else is refused. */
    public static final int SUPERVISOR_FORMAT = 2;
    /** Token lifetime when the request names none: the profile's maximum. */
    public static final Duration DEFAULT_TOKEN_LIFETIME = ProtocolLimits.TOKEN_MAX_LIFETIME;

    /** Most operator host aliases one launch carries. */
    public static final int MAX_HOST_ALIASES = 256;
    /** Most extra upstream trust anchors one launch carries. */
    public static final int MAX_UPSTREAM_AUTHORITIES = 64;

    private static final Pattern CREDENTIAL_NAME = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
    private static final Pattern HOST_NAME = Pattern.compile("[a-z0-9_]([a-z0-9_-]{0,62})(\\.[a-z0-9_]([a-z0-9_-]{0,62}))*");

    private LaunchBundles() {
    }

    /**
     * The agent the runtime starts.
     *
     * @param argv             the command, first element an absolute path
     * @param environment      its environment (credential placeholders, never secrets)
     * @param workingDirectory its absolute working directory
     */
    public record Agent(List<String> argv, Map<String, String> environment, String workingDirectory) {
        /**
         * Canonical constructor.
         *
         * @param argv             argv
         * @param environment      environment
         * @param workingDirectory working directory
         */
        public Agent {
            argv = List.copyOf(argv);
            environment = Map.copyOf(environment);
            Objects.requireNonNull(workingDirectory);
            if (argv.isEmpty() || !argv.getFirst().startsWith("/")) {
                throw invalid("agent argv must start with an absolute path");
            }
            if (!workingDirectory.startsWith("/")) {
                throw invalid("agent working directory must be absolute");
            }
        }
    }

    /**
     * A provider credential: a named secret and the only hosts it may be sent to.
     *
     * @param name   a lower-case DNS label
     * @param secret the secret value
     * @param hosts  exact host names it is bound to (at least one)
     */
    public record Credential(String name, byte[] secret, List<String> hosts) {
        /**
         * Canonical constructor; copies the secret.
         *
         * @param name   name
         * @param secret secret
         * @param hosts  hosts
         */
        public Credential {
            if (name == null || !CREDENTIAL_NAME.matcher(name).matches()) {
                throw invalid("a credential name is a lower-case DNS label: '" + name + "'");
            }
            if (secret == null || secret.length == 0) {
                throw invalid("credential " + name + " has an empty secret");
            }
            secret = secret.clone();
            hosts = List.copyOf(hosts);
            if (hosts.isEmpty() || hosts.stream().anyMatch(String::isBlank)) {
                throw invalid("credential " + name + " must be bound to at least one host");
            }
        }

        /**
         * The secret.
         *
         * @return a copy
         */
        @Override
        public byte[] secret() {
            return secret.clone();
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Credential c && name.equals(c.name) && Arrays.equals(secret, c.secret)
                    && hosts.equals(c.hosts);
        }

        @Override
        public int hashCode() {
            return Objects.hash(name, hosts);
        }

        @Override
        public String toString() {
            return "Credential[" + name + ", hosts " + hosts + ", secret hidden]";
        }
    }

    /**
     * What one launch is: ids, policy, agent, workload identity, credentials and the optional
     * gateway session endpoint. Built with {@link #builder()}.
     */
    public static final class Request {
        private final String sandboxId;
        private final String sessionId;
        private final long generation;
        private final String sessionLineage;
        private final byte[] policyYaml;
        private final Agent agent;
        private final int workloadUid;
        private final int workloadGid;
        private final WorkloadConfinement confinement;
        private final List<Credential> credentials;
        private final Optional<String> gatewayEndpoint;
        private final Duration tokenLifetime;
        private final Map<String, InetAddress> hostAliases;
        private final List<X509Certificate> upstreamAuthorities;
        private final Optional<InetSocketAddress> upstreamResolver;

        private Request(Builder b) {
            this.sandboxId = requireText(b.sandboxId, "sandbox id");
            this.sessionId = requireText(b.sessionId, "session id");
            SandboxServerName.of(sessionId);
            if (b.generation < 0) {
                throw invalid("generation must be >= 0");
            }
            this.generation = b.generation;
            this.sessionLineage = b.sessionLineage == null ? sessionId : requireText(b.sessionLineage, "session lineage");
            if (b.policyYaml == null || b.policyYaml.length == 0) {
                throw invalid("policy YAML is required");
            }
            this.policyYaml = b.policyYaml.clone();
            this.agent = Objects.requireNonNull(b.agent, "agent");
            this.workloadUid = requireWorkloadId(b.workloadUid, "workload uid");
            this.workloadGid = requireWorkloadId(b.workloadGid, "workload gid");
            this.confinement = Objects.requireNonNull(b.confinement, "confinement");
            this.credentials = uniqueNames(b.credentials);
            this.gatewayEndpoint = b.gatewayEndpoint.map(LaunchBundles::requireEndpoint);
            this.tokenLifetime = b.tokenLifetime;
            this.hostAliases = hostAliases(b.hostAliases);
            this.upstreamAuthorities = upstreamAuthorities(b.upstreamAuthorities);
            this.upstreamResolver = b.upstreamResolver.map(LaunchBundles::upstreamResolver);
        }

        /**
         * A builder.
         *
         * @return a builder
         */
        public static Builder builder() {
            return new Builder();
        }

        @Override
        public String toString() {
            return "LaunchBundles.Request[sandbox=" + sandboxId + ", session=" + sessionId + ", generation=" + generation
                    + ", credentials=" + credentials.stream().map(Credential::name).toList() + "]";
        }

        /** Builder of {@link Request}. */
        public static final class Builder {
            private String sandboxId;
            private String sessionId;
            private long generation;
            private String sessionLineage;
            private byte[] policyYaml;
            private Agent agent;
            private int workloadUid = -1;
            private int workloadGid = -1;
            private WorkloadConfinement confinement = WorkloadConfinement.standard();
            private final List<Credential> credentials = new ArrayList<>();
            private Optional<String> gatewayEndpoint = Optional.empty();
            private Duration tokenLifetime = DEFAULT_TOKEN_LIFETIME;
            private final Map<String, InetAddress> hostAliases = new LinkedHashMap<>();
            private final List<X509Certificate> upstreamAuthorities = new ArrayList<>();
            private Optional<InetSocketAddress> upstreamResolver = Optional.empty();

            private Builder() {
            }

            /**
             * The DNS server the supervisor asks instead of the host's resolver (trusted gateway
             * configuration, supervisor bundle only): how a test keeps every lookup on loopback.
             *
             * @param v an IP address and port, never a name
             * @return this
             */
            public Builder upstreamResolver(InetSocketAddress v) {
                this.upstreamResolver = Optional.of(Objects.requireNonNull(v));
                return this;
            }

            /**
             * An operator host alias (trusted gateway configuration, supervisor bundle only).
             *
             * @param name    a DNS host name (lower case)
             * @param address the address the supervisor dials for it
             * @return this
             */
            public Builder hostAlias(String name, InetAddress address) {
                if (hostAliases.putIfAbsent(Objects.requireNonNull(name), Objects.requireNonNull(address)) != null) {
                    throw invalid("host alias " + name + " is declared twice");
                }
                return this;
            }

            /**
             * An extra trust anchor for upstream TLS (trusted gateway configuration, supervisor bundle only).
             *
             * @param v the certificate
             * @return this
             */
            public Builder upstreamAuthority(X509Certificate v) {
                this.upstreamAuthorities.add(Objects.requireNonNull(v));
                return this;
            }

            /**
             * @param v the sandbox id
             * @return this
             */
            public Builder sandboxId(String v) {
                this.sandboxId = v;
                return this;
            }

            /**
             * @param v the session id, a lower-case DNS label (the runtime's TLS name derives from it)
             * @return this
             */
            public Builder sessionId(String v) {
                this.sessionId = v;
                return this;
            }

            /**
             * @param v the runtime generation, {@code >= 0}
             * @return this
             */
            public Builder generation(long v) {
                this.generation = v;
                return this;
            }

            /**
             * @param v the session lineage the tokens carry (default: the session id)
             * @return this
             */
            public Builder sessionLineage(String v) {
                this.sessionLineage = v;
                return this;
            }

            /**
             * @param v the policy YAML (UTF-8)
             * @return this
             */
            public Builder policyYaml(String v) {
                this.policyYaml = v.getBytes(StandardCharsets.UTF_8);
                return this;
            }

            /**
             * @param v the agent
             * @return this
             */
            public Builder agent(Agent v) {
                this.agent = v;
                return this;
            }

            /**
             * @param uid the workload's user id (not 0)
             * @param gid the workload's group id (not 0)
             * @return this
             */
            public Builder workload(int uid, int gid) {
                this.workloadUid = uid;
                this.workloadGid = gid;
                return this;
            }

            /**
             * @param v the policy's static sections (runtime bundle; default {@link WorkloadConfinement#standard()})
             * @return this
             */
            public Builder confinement(WorkloadConfinement v) {
                this.confinement = Objects.requireNonNull(v);
                return this;
            }

            /**
             * @param v a provider credential (supervisor bundle only)
             * @return this
             */
            public Builder addCredential(Credential v) {
                this.credentials.add(Objects.requireNonNull(v));
                return this;
            }

            /**
             * @param v the gateway's session endpoint URL ({@code http} or {@code https})
             * @return this
             */
            public Builder gatewayEndpoint(String v) {
                this.gatewayEndpoint = Optional.of(v);
                return this;
            }

            /**
             * @param v token lifetime, within the profile (default {@link #DEFAULT_TOKEN_LIFETIME})
             * @return this
             */
            public Builder tokenLifetime(Duration v) {
                this.tokenLifetime = Objects.requireNonNull(v);
                return this;
            }

            /**
             * Validates and builds.
             *
             * @return the request
             * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} naming the bad field
             */
            public Request build() {
                return new Request(this);
            }
        }
    }

    /**
     * The two bundles of one launch and the tokens in the supervisor's.
     *
     * @param supervisorBundle bytes for the supervisor's standard input
     * @param runtimeBundle    bytes for the runtime's standard input
     * @param tokens           the token pair (the gateway records its epoch and expiry)
     */
    public record Minted(byte[] supervisorBundle, byte[] runtimeBundle, TokenPair tokens) {
        /**
         * Canonical constructor; copies.
         *
         * @param supervisorBundle supervisor bundle
         * @param runtimeBundle    runtime bundle
         * @param tokens           tokens
         */
        public Minted {
            supervisorBundle = supervisorBundle.clone();
            runtimeBundle = runtimeBundle.clone();
            Objects.requireNonNull(tokens);
        }

        /**
         * @return a copy of the supervisor bundle
         */
        @Override
        public byte[] supervisorBundle() {
            return supervisorBundle.clone();
        }

        /**
         * @return a copy of the runtime bundle
         */
        @Override
        public byte[] runtimeBundle() {
            return runtimeBundle.clone();
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Minted m && Arrays.equals(supervisorBundle, m.supervisorBundle)
                    && Arrays.equals(runtimeBundle, m.runtimeBundle) && tokens.equals(m.tokens);
        }

        @Override
        public int hashCode() {
            return Objects.hash(Arrays.hashCode(supervisorBundle), Arrays.hashCode(runtimeBundle), tokens);
        }

        @Override
        public String toString() {
            return "Minted[supervisor " + supervisorBundle.length + " bytes, runtime " + runtimeBundle.length
                    + " bytes, " + tokens + "]";
        }
    }

    /**
     * Mints the bundles of one launch: fresh TLS material ({@link LaunchTls#issue}) and a token pair
     * of {@code credentialEpoch} for component {@value RuntimeBundle#SUPERVISOR_COMPONENT}.
     *
     * @param request         the launch
     * @param issuer          the gateway's token issuer
     * @param credentialEpoch the first credential epoch, {@code > 0}
     * @return both bundles and the tokens
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} if a bundle would exceed
     *                           {@link #MAX_BUNDLE_BYTES}; token refusals from the issuer
     */
    public static Minted mint(Request request, TokenIssuer issuer, long credentialEpoch) {
        Objects.requireNonNull(request);
        Objects.requireNonNull(issuer);
        LaunchTls tls = LaunchTls.issue(request.sessionId);
        TokenPair tokens = issuer.mintPair(new TokenGrant(request.sandboxId, request.generation, request.sessionLineage,
                RuntimeBundle.SUPERVISOR_COMPONENT, request.tokenLifetime), credentialEpoch);
        try {
            openshell.protocol.wire.RuntimeBundle runtime = openshell.protocol.wire.RuntimeBundle.newBuilder()
                    .setFormat(RUNTIME_FORMAT)
                    .setSandboxId(request.sandboxId)
                    .setSessionId(request.sessionId)
                    .setGeneration(request.generation)
                    .setTokenIssuer(issuer.issuer())
                    .setVerificationKey(VerificationKey.newBuilder().setKeyId(issuer.verificationKey().keyId())
                            .setPublicKeyDer(ByteString.copyFrom(issuer.verificationKey().publicKey().getEncoded())))
                    .setTlsLeafKeyPkcs8(ByteString.copyFrom(tls.runtime().leafKey().getEncoded()))
                    .addAllTlsChainDer(encoded(tls.runtime().chain()))
                    .setWorkloadUid(request.workloadUid)
                    .setWorkloadGid(request.workloadGid)
                    .setSessionLineage(request.sessionLineage)
                    .setConfinement(request.confinement.wire())
                    .build();
            openshell.protocol.wire.SupervisorBundle.Builder supervisor = openshell.protocol.wire.SupervisorBundle.newBuilder()
                    .setFormat(SUPERVISOR_FORMAT)
                    .setSandboxId(request.sandboxId)
                    .setSessionId(request.sessionId)
                    .setGeneration(request.generation)
                    .setSessionLineage(request.sessionLineage)
                    .setTlsAuthorityDer(ByteString.copyFrom(tls.pin().authority().getEncoded()))
                    .setGatewayToken(tokens.gatewayToken())
                    .setSandboxToken(tokens.sandboxToken())
                    .setCredentialEpoch(tokens.credentialEpoch())
                    .setTokensExpireAt(tokens.expiresAt().getEpochSecond())
                    .setPolicyYaml(ByteString.copyFrom(request.policyYaml))
                    .setAgent(AgentLaunch.newBuilder().addAllArgv(request.agent.argv())
                            .putAllEnvironment(request.agent.environment())
                            .setWorkingDirectory(request.agent.workingDirectory()))
                    .setWorkloadUid(request.workloadUid)
                    .setWorkloadGid(request.workloadGid)
                    .setGatewayEndpoint(request.gatewayEndpoint.orElse(""));
            request.hostAliases.forEach((name, address) -> supervisor.addHostAliases(HostAlias.newBuilder().setName(name)
                    .setAddress(ByteString.copyFrom(address.getAddress()))));
            for (X509Certificate authority : request.upstreamAuthorities) {
                supervisor.addUpstreamAuthoritiesDer(ByteString.copyFrom(authority.getEncoded()));
            }
            request.upstreamResolver.ifPresent(r -> supervisor.setUpstreamResolver(ResolverEndpoint.newBuilder()
                    .setAddress(ByteString.copyFrom(r.getAddress().getAddress())).setPort(r.getPort())));
            for (Credential c : request.credentials) {
                supervisor.addCredentials(ProviderCredential.newBuilder().setName(c.name())
                        .setSecret(ByteString.copyFrom(c.secret)).addAllHosts(c.hosts()));
            }
            byte[] runtimeBytes = bounded(runtime, "runtime");
            byte[] supervisorBytes = bounded(supervisor.build(), "supervisor");
            return new Minted(supervisorBytes, runtimeBytes, tokens);
        } catch (GeneralSecurityException e) {
            throw new ProtocolException(Refusal.BUNDLE_INVALID, "cannot encode the launch TLS material", e);
        }
    }

    /**
     * Most bytes of the late arguments before a bundle ({@link #readLateArguments}), separators
     * included: a sandbox id, a generation and a workspace path fit many times over.
     */
    public static final int MAX_LATE_ARGUMENT_BYTES = 4096;

    /** The flag that makes a main read its late arguments from standard input before its bundle. */
    public static final String LATE_ARGUMENTS = "--late-arguments";

    /**
     * The line a main started with {@link #LATE_ARGUMENTS} (a warm spare) prints on its standard
     * output once it is ready and waits for them: the driver that started it reads this line.
     */
    public static final String SPARE_WAITING = "{\"spare\":\"waiting\"}";

    /**
     * A main's whole command line: {@code args} as given, or, with {@link #LATE_ARGUMENTS} among
     * them, without it and followed by the late arguments read from {@code in}
     * ({@link #readLateArguments}), which then holds the bundle that follows them.
     *
     * @param args    the command line
     * @param in      the main's standard input
     * @param options the options that may come late
     * @return the arguments to parse
     * @throws IOException if reading fails
     * @throws ProtocolException as {@link #readLateArguments}
     */
    public static List<String> withLateArguments(List<String> args, InputStream in, Set<String> options) throws IOException {
        if (!args.contains(LATE_ARGUMENTS)) {
            return args;
        }
        List<String> all = new ArrayList<>(args);
        all.remove(LATE_ARGUMENTS);
        all.addAll(readLateArguments(in, options));
        return all;
    }

    /**
     * Reads the late arguments a warm spare gets before its bundle: arguments its launcher could
     * not know when the program was started ahead of its sandbox (the sandbox id, the generation,
     * the workspace). Each is UTF-8 ended by a NUL byte (so a path may hold any other byte); an
     * empty one ends them. Reads byte by byte and nothing past the end, so the bundle that follows
     * is left whole on the stream. The arguments are not secret: only launch bundles are.
     *
     * @param in      the stream (a main's standard input)
     * @param options the options that may come late, each followed by its value
     * @return the arguments, in order
     * @throws IOException if reading fails
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} if the stream ends before the empty
     *                           argument, the arguments exceed {@link #MAX_LATE_ARGUMENT_BYTES}, or
     *                           one is not among {@code options} with a value after it
     */
    public static List<String> readLateArguments(InputStream in, Set<String> options) throws IOException {
        List<String> arguments = new ArrayList<>();
        java.io.ByteArrayOutputStream current = new java.io.ByteArrayOutputStream();
        for (int read = 0; ; read++) {
            if (read >= MAX_LATE_ARGUMENT_BYTES) {
                throw invalid("late arguments longer than " + MAX_LATE_ARGUMENT_BYTES + " bytes");
            }
            int b = in.read();
            if (b < 0) {
                throw invalid("standard input ended inside the late arguments (" + arguments.size() + " read)");
            }
            if (b != 0) {
                current.write(b);
                continue;
            }
            if (current.size() == 0) {
                for (int i = 0; i < arguments.size(); i += 2) {
                    if (!options.contains(arguments.get(i)) || i + 1 >= arguments.size()) {
                        throw invalid("late arguments may only be " + new java.util.TreeSet<>(options)
                                + ", each with a value; got " + arguments);
                    }
                }
                return List.copyOf(arguments);
            }
            arguments.add(current.toString(StandardCharsets.UTF_8));
            current.reset();
        }
    }

    /**
     * Reads a whole bundle from a stream (a main's standard input), at most
     * {@link #MAX_BUNDLE_BYTES}, and closes the stream.
     *
     * @param in the stream
     * @return the bytes; the caller zeroes them after parsing
     * @throws IOException if reading fails
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} if empty or too large
     */
    public static byte[] read(InputStream in) throws IOException {
        try (in) {
            byte[] bytes = in.readNBytes(MAX_BUNDLE_BYTES + 1);
            if (bytes.length > MAX_BUNDLE_BYTES) {
                Arrays.fill(bytes, (byte) 0);
                throw invalid("launch bundle larger than " + MAX_BUNDLE_BYTES + " bytes");
            }
            if (bytes.length == 0) {
                throw invalid("empty launch bundle");
            }
            return bytes;
        }
    }

    /**
     * Parses and validates a runtime bundle.
     *
     * @param bytes the bundle (not modified; the caller zeroes it)
     * @return the view
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} naming what is wrong
     */
    public static RuntimeBundle runtimeBundle(byte[] bytes) {
        checkSize(bytes);
        checkFormat(formatOf(bytes, "runtime"), RUNTIME_FORMAT, "runtime");
        openshell.protocol.wire.RuntimeBundle wire;
        try {
            wire = openshell.protocol.wire.RuntimeBundle.parseFrom(bytes);
        } catch (InvalidProtocolBufferException e) {
            throw invalid("the runtime bundle is not a valid launch bundle (corrupt protobuf)");
        }
        if (!wire.getUnknownFields().asMap().isEmpty()) {
            throw invalid("the runtime bundle carries unknown fields " + wire.getUnknownFields().asMap().keySet());
        }
        String sandboxId = requireText(wire.getSandboxId(), "sandbox_id");
        String sessionId = requireText(wire.getSessionId(), "session_id");
        String serverName = serverName(sessionId);
        long generation = requireGeneration(wire.getGeneration());
        String lineage = requireText(wire.getSessionLineage(), "session_lineage");
        String tokenIssuer = requireText(wire.getTokenIssuer(), "token_issuer");
        if (!wire.hasVerificationKey()) {
            throw invalid("the runtime bundle has no verification_key");
        }
        TokenKey key = new TokenKey(requireText(wire.getVerificationKey().getKeyId(), "verification_key.key_id"),
                publicKey(wire.getVerificationKey().getPublicKeyDer()));
        if (wire.getTlsLeafKeyPkcs8().isEmpty()) {
            throw invalid("the runtime bundle has no tls_leaf_key_pkcs8");
        }
        PrivateKey leafKey;
        byte[] pkcs8 = wire.getTlsLeafKeyPkcs8().toByteArray();
        try {
            leafKey = KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(pkcs8));
        } catch (GeneralSecurityException e) {
            throw invalid("tls_leaf_key_pkcs8 is not an EC private key");
        } finally {
            Arrays.fill(pkcs8, (byte) 0);
        }
        if (wire.getTlsChainDerCount() == 0) {
            throw invalid("the runtime bundle has no tls_chain_der");
        }
        List<X509Certificate> chain = new ArrayList<>();
        for (ByteString der : wire.getTlsChainDerList()) {
            chain.add(certificate(der, "tls_chain_der"));
        }
        return new RuntimeBundle(sandboxId, sessionId, generation, lineage, tokenIssuer, key,
                new RuntimeTlsIdentity(serverName, leafKey, chain), requireWorkloadId(wire.getWorkloadUid(), "workload_uid"),
                requireWorkloadId(wire.getWorkloadGid(), "workload_gid"));
    }

    /**
     * The static sections a runtime bundle carries (the standard ones when it has none).
     *
     * @param bytes the bundle (not modified; the caller zeroes it)
     * @return the confinement
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} naming what is wrong
     */
    public static WorkloadConfinement runtimeConfinement(byte[] bytes) {
        checkSize(bytes);
        try {
            openshell.protocol.wire.RuntimeBundle wire = openshell.protocol.wire.RuntimeBundle.parseFrom(bytes);
            return wire.hasConfinement() ? WorkloadConfinement.of(wire.getConfinement()) : WorkloadConfinement.standard();
        } catch (InvalidProtocolBufferException e) {
            throw invalid("the runtime bundle is not a valid launch bundle (corrupt protobuf)");
        }
    }

    /**
     * Parses and validates a supervisor bundle.
     *
     * @param bytes the bundle (not modified; the caller zeroes it)
     * @return the view
     * @throws ProtocolException {@link Refusal#BUNDLE_INVALID} naming what is wrong
     */
    public static SupervisorBundle supervisorBundle(byte[] bytes) {
        checkSize(bytes);
        checkFormat(formatOf(bytes, "supervisor"), SUPERVISOR_FORMAT, "supervisor");
        openshell.protocol.wire.SupervisorBundle wire;
        try {
            wire = openshell.protocol.wire.SupervisorBundle.parseFrom(bytes);
        } catch (InvalidProtocolBufferException e) {
            throw invalid("the supervisor bundle is not a valid launch bundle (corrupt protobuf)");
        }
        if (!wire.getUnknownFields().asMap().isEmpty()) {
            throw invalid("the supervisor bundle carries unknown fields " + wire.getUnknownFields().asMap().keySet());
        }
        String sandboxId = requireText(wire.getSandboxId(), "sandbox_id");
        String sessionId = requireText(wire.getSessionId(), "session_id");
        String serverName = serverName(sessionId);
        long generation = requireGeneration(wire.getGeneration());
        String lineage = requireText(wire.getSessionLineage(), "session_lineage");
        TlsPin pin = new TlsPin(serverName, certificate(wire.getTlsAuthorityDer(), "tls_authority_der"));
        String gatewayToken = requireText(wire.getGatewayToken(), "gateway_token");
        String sandboxToken = requireText(wire.getSandboxToken(), "sandbox_token");
        if (wire.getCredentialEpoch() <= 0) {
            throw invalid("credential_epoch must be > 0");
        }
        if (wire.getTokensExpireAt() <= 0) {
            throw invalid("tokens_expire_at is missing");
        }
        TokenPair tokens = new TokenPair(gatewayToken, sandboxToken, wire.getCredentialEpoch(),
                Instant.ofEpochSecond(wire.getTokensExpireAt()));
        if (wire.getPolicyYaml().isEmpty()) {
            throw invalid("the supervisor bundle has no policy_yaml");
        }
        if (!wire.hasAgent()) {
            throw invalid("the supervisor bundle has no agent");
        }
        Agent agent = new Agent(wire.getAgent().getArgvList(), new LinkedHashMap<>(wire.getAgent().getEnvironmentMap()),
                wire.getAgent().getWorkingDirectory());
        int uid = requireWorkloadId(wire.getWorkloadUid(), "workload_uid");
        int gid = requireWorkloadId(wire.getWorkloadGid(), "workload_gid");
        List<Credential> credentials = new ArrayList<>();
        for (ProviderCredential c : wire.getCredentialsList()) {
            byte[] secret = c.getSecret().toByteArray();
            try {
                credentials.add(new Credential(c.getName(), secret, c.getHostsList()));
            } finally {
                Arrays.fill(secret, (byte) 0);
            }
        }
        uniqueNames(credentials);
        Optional<String> endpoint = wire.getGatewayEndpoint().isEmpty() ? Optional.empty()
                : Optional.of(requireEndpoint(wire.getGatewayEndpoint()));
        Map<String, InetAddress> aliases = new LinkedHashMap<>();
        for (HostAlias alias : wire.getHostAliasesList()) {
            InetAddress address;
            try {
                int length = alias.getAddress().size();
                if (length != 4 && length != 16) {
                    throw invalid("host alias " + alias.getName() + " has an address of " + length + " bytes");
                }
                address = InetAddress.getByAddress(alias.getAddress().toByteArray());
            } catch (UnknownHostException e) {
                throw invalid("host alias " + alias.getName() + " has no valid address");
            }
            if (aliases.putIfAbsent(alias.getName(), address) != null) {
                throw invalid("host alias " + alias.getName() + " is declared twice");
            }
        }
        List<X509Certificate> authorities = new ArrayList<>();
        for (ByteString der : wire.getUpstreamAuthoritiesDerList()) {
            authorities.add(certificate(der, "upstream_authorities_der"));
        }
        Optional<InetSocketAddress> resolver = Optional.empty();
        if (wire.hasUpstreamResolver()) {
            ResolverEndpoint r = wire.getUpstreamResolver();
            if (r.getAddress().size() != 4 && r.getAddress().size() != 16) {
                throw invalid("upstream_resolver has an address of " + r.getAddress().size() + " bytes");
            }
            if (Integer.toUnsignedLong(r.getPort()) > 65535) {
                throw invalid("upstream_resolver has port " + Integer.toUnsignedString(r.getPort()));
            }
            try {
                resolver = Optional.of(upstreamResolver(new InetSocketAddress(
                        InetAddress.getByAddress(r.getAddress().toByteArray()), r.getPort())));
            } catch (UnknownHostException e) {
                throw invalid("upstream_resolver has no valid address");
            }
        }
        return new SupervisorBundle(sandboxId, sessionId, generation, lineage, pin, tokens,
                wire.getPolicyYaml().toByteArray(), agent, uid, gid, credentials, endpoint, hostAliases(aliases),
                upstreamAuthorities(authorities), resolver);
    }

    /** An address literal and a port a UDP datagram can go to; a name would need a resolver to find the resolver. */
    private static InetSocketAddress upstreamResolver(InetSocketAddress r) {
        if (r.isUnresolved()) {
            throw invalid("the upstream resolver is an IP address, not the name " + r.getHostString());
        }
        if (r.getPort() == 0) {
            throw invalid("the upstream resolver " + r.getAddress().getHostAddress() + " has port 0");
        }
        if (r.getAddress().isAnyLocalAddress() || r.getAddress().isMulticastAddress()) {
            throw invalid("the upstream resolver " + r.getAddress().getHostAddress() + " is not a host address");
        }
        return r;
    }

    private static Map<String, InetAddress> hostAliases(Map<String, InetAddress> aliases) {
        if (aliases.size() > MAX_HOST_ALIASES) {
            throw invalid(aliases.size() + " host aliases, more than " + MAX_HOST_ALIASES);
        }
        for (Map.Entry<String, InetAddress> alias : aliases.entrySet()) {
            String name = alias.getKey();
            if (name.length() > 253 || !HOST_NAME.matcher(name).matches()) {
                throw invalid("a host alias is a lower-case DNS host name: '" + name + "'");
            }
            if (alias.getValue().isAnyLocalAddress() || alias.getValue().isMulticastAddress()) {
                throw invalid("host alias " + name + " maps to " + alias.getValue().getHostAddress()
                        + ", which is not a host address");
            }
        }
        return java.util.Collections.unmodifiableMap(new LinkedHashMap<>(aliases));
    }

    private static List<X509Certificate> upstreamAuthorities(List<X509Certificate> authorities) {
        if (authorities.size() > MAX_UPSTREAM_AUTHORITIES) {
            throw invalid(authorities.size() + " upstream authorities, more than " + MAX_UPSTREAM_AUTHORITIES);
        }
        return List.copyOf(authorities);
    }

    private static byte[] bounded(MessageLite message, String kind) {
        int size = message.getSerializedSize();
        if (size > MAX_BUNDLE_BYTES) {
            throw invalid("the " + kind + " bundle would be " + size + " bytes, above " + MAX_BUNDLE_BYTES);
        }
        return message.toByteArray();
    }

    private static void checkSize(byte[] bytes) {
        Objects.requireNonNull(bytes);
        if (bytes.length == 0) {
            throw invalid("empty launch bundle");
        }
        if (bytes.length > MAX_BUNDLE_BYTES) {
            throw invalid("launch bundle of " + bytes.length + " bytes, above " + MAX_BUNDLE_BYTES);
        }
    }

    /** Field 1 of either bundle, read before the typed parse so one kind is never taken for the other. */
    private static int formatOf(byte[] bytes, String kind) {
        try {
            List<Long> format = UnknownFieldSet.parseFrom(bytes).getField(1).getVarintList();
            return format.size() == 1 && format.getFirst() >= 0 && format.getFirst() <= Integer.MAX_VALUE
                    ? format.getFirst().intValue() : 0;
        } catch (InvalidProtocolBufferException e) {
            throw invalid("the " + kind + " bundle is not a valid launch bundle (corrupt protobuf)");
        }
    }

    private static void checkFormat(int format, int expected, String kind) {
        if (format == expected) {
            return;
        }
        String what = switch (format) {
            case RUNTIME_FORMAT -> "a runtime bundle";
            case SUPERVISOR_FORMAT -> "a supervisor bundle";
            case 0 -> "a bundle without a format";
            default -> "a bundle of unknown format " + format;
        };
        throw invalid("expected a " + kind + " bundle, got " + what);
    }

    private static String serverName(String sessionId) {
        try {
            return SandboxServerName.of(sessionId);
        } catch (ProtocolException e) {
            throw invalid("session_id: " + e.getMessage());
        }
    }

    private static long requireGeneration(long generation) {
        if (generation < 0) {
            throw invalid("generation out of range");
        }
        return generation;
    }

    private static int requireWorkloadId(int id, String field) {
        if (id <= 0) {
            throw invalid(field + " must be > 0 (the workload never runs as root)");
        }
        return id;
    }

    private static String requireText(String value, String field) {
        if (value == null || value.isBlank()) {
            throw invalid(field + " is missing");
        }
        return value;
    }

    private static String requireEndpoint(String endpoint) {
        try {
            URI uri = new URI(endpoint);
            if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
                throw invalid("gateway endpoint must be an http(s) URL with a host: " + endpoint);
            }
            return endpoint;
        } catch (URISyntaxException e) {
            throw invalid("gateway endpoint is not a URL: " + endpoint);
        }
    }

    private static List<Credential> uniqueNames(List<Credential> credentials) {
        Set<String> names = new HashSet<>();
        for (Credential c : credentials) {
            if (!names.add(c.name())) {
                throw invalid("credential " + c.name() + " is declared twice");
            }
        }
        return List.copyOf(credentials);
    }

    private static ECPublicKey publicKey(ByteString der) {
        try {
            if (KeyFactory.getInstance("EC").generatePublic(new X509EncodedKeySpec(der.toByteArray()))
                    instanceof ECPublicKey ec && ec.getParams().getCurve().getField().getFieldSize() == 256) {
                return ec;
            }
        } catch (GeneralSecurityException e) {
            // Falls through to the refusal below.
        }
        throw invalid("verification_key.public_key_der is not a P-256 public key");
    }

    private static X509Certificate certificate(ByteString der, String field) {
        if (der.isEmpty()) {
            throw invalid(field + " is missing");
        }
        try {
            return (X509Certificate) CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(der.toByteArray()));
        } catch (GeneralSecurityException | ClassCastException e) {
            throw invalid(field + " is not an X.509 certificate");
        }
    }

    private static List<ByteString> encoded(List<X509Certificate> chain) throws GeneralSecurityException {
        List<ByteString> out = new ArrayList<>();
        for (X509Certificate c : chain) {
            out.add(ByteString.copyFrom(c.getEncoded()));
        }
        return out;
    }

    private static ProtocolException invalid(String detail) {
        return new ProtocolException(Refusal.BUNDLE_INVALID, detail);
    }
}
