package openshell.policy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import openshell.isolation.PolicySnapshot;

/**
 * A validated policy document: the static sections the launcher and sandbox runtime apply at
 * creation, and the network section the {@link PolicyGeneration} engine decides with. A document
 * with any problem never becomes a {@code Policy}: {@link #parse} reports every problem at once.
 * Immutable and thread-safe.
 */
public final class Policy {
    /** The only policy format version this engine reads. */
    public static final int VERSION = 1;
    /** Largest document accepted, in bytes (the same bound as {@link PolicySnapshot#MAX_DOCUMENT_BYTES}). */
    public static final int MAX_DOCUMENT_BYTES = PolicySnapshot.MAX_DOCUMENT_BYTES;
    /** Deepest YAML nesting the parser accepts (the schema itself needs 6). */
    public static final int MAX_NESTING_DEPTH = 32;
    /** Most aliases to collections in one document: with {@link #MAX_NODES}, the bound on alias expansion. */
    public static final int MAX_ALIASES = 16;
    /** Most nodes read while validating, counting an aliased node each time it is reached. */
    public static final int MAX_NODES = 200_000;
    /** Most {@code network_policies} blocks. */
    public static final int MAX_NETWORK_POLICIES = 256;
    /** Most endpoints in one block. */
    public static final int MAX_ENDPOINTS = 256;
    /** Most binaries in one block. */
    public static final int MAX_BINARIES = 256;
    /** Most entries in one endpoint's {@code rules}, and separately in its {@code deny_rules}. */
    public static final int MAX_RULES = 256;
    /** Most parameters named in one rule's {@code query}. */
    public static final int MAX_QUERY_CONDITIONS = 32;
    /** Most parameters decoded from one request's query when a rule reads it; more denies the request. */
    public static final int MAX_QUERY_PARAMETERS = QueryString.MAX_PARAMETERS;
    /** Most entries in one endpoint's {@code ports}. */
    public static final int MAX_PORTS = 256;
    /** Most paths in {@code filesystem_policy}, read-only and read-write together. */
    public static final int MAX_FILESYSTEM_PATHS = 256;
    /** Longest block name. */
    public static final int MAX_NAME_LENGTH = 63;
    /** Longest filesystem or binary path (Linux PATH_MAX). */
    public static final int MAX_PATH_LENGTH = 4096;
    /** Longest path pattern in a rule. */
    public static final int MAX_PATH_PATTERN_LENGTH = RequestPaths.MAX_PATTERN_LENGTH;
    /** Longest HTTP method, in a rule or a request; a longer request method is denied. */
    public static final int MAX_METHOD_LENGTH = HttpMethods.MAX_LENGTH;
    /** Longest HTTP request target the engine normalizes; a longer one is denied. */
    public static final int MAX_REQUEST_TARGET_LENGTH = RequestPaths.MAX_TARGET_LENGTH;

    private final byte[] document;
    private final String sha256;
    private final FilesystemPolicy filesystem;
    private final LandlockCompatibility landlock;
    private final ProcessPolicy process;
    private final List<NetworkModel.Block> blocks;

    Policy(byte[] document, FilesystemPolicy filesystem, LandlockCompatibility landlock, ProcessPolicy process,
           List<NetworkModel.Block> blocks) {
        this.document = document;
        this.sha256 = PolicySnapshot.of(1, document).sha256();
        this.filesystem = filesystem;
        this.landlock = landlock;
        this.process = process;
        this.blocks = List.copyOf(blocks);
    }

    /**
     * @param document the YAML document, UTF-8
     * @return the policy
     * @throws PolicyException with every problem, if the document has any
     */
    public static Policy parse(byte[] document) {
        Objects.requireNonNull(document, "document");
        return new PolicyReader().read(document.clone());
    }

    /**
     * @param document the YAML document
     * @return the policy
     * @throws PolicyException with every problem, if the document has any
     */
    public static Policy parse(String document) {
        Objects.requireNonNull(document, "document");
        return parse(document.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * @param document the YAML document, UTF-8
     * @return every problem, in document order; empty when the document is a valid policy
     */
    public static List<PolicyProblem> check(byte[] document) {
        try {
            parse(document);
            return List.of();
        } catch (PolicyException e) {
            return e.problems();
        }
    }

    /** @return the exact bytes that were validated (a copy) */
    public byte[] document() {
        return document.clone();
    }

    /** @return the SHA-256 of {@link #document()}, lower-case hex */
    public String sha256() {
        return sha256;
    }

    /**
     * @param generation the generation number
     * @return the snapshot a backend enforces and confirms
     */
    public PolicySnapshot snapshot(long generation) {
        return PolicySnapshot.of(generation, document);
    }

    /** @return the static filesystem section */
    public FilesystemPolicy filesystem() {
        return filesystem;
    }

    /** @return the static Landlock section */
    public LandlockCompatibility landlock() {
        return landlock;
    }

    /** @return the static process section */
    public ProcessPolicy process() {
        return process;
    }

    /** @return the names of the {@code network_policies} blocks, in document order */
    public List<String> networkPolicyNames() {
        return blocks.stream().map(NetworkModel.Block::name).toList();
    }

    /**
     * @return the {@code rest} endpoints with {@code enforcement: audit}, in document order: their
     *         rules log would-be denials and never block (what {@code policy check} warns about)
     */
    public List<RuleRef> auditedEndpoints() {
        return blocks.stream().flatMap(b -> b.endpoints().stream()).filter(e -> e.rest && !e.enforce).map(e -> e.ref).toList();
    }

    /**
     * @param other another policy
     * @return whether both have the same static sections (what a reload may not change)
     */
    public boolean sameStaticSections(Policy other) {
        return filesystem.equals(other.filesystem) && landlock == other.landlock && process.equals(other.process);
    }

    List<NetworkModel.Block> blocks() {
        return blocks;
    }

    @Override
    public String toString() {
        return "Policy[sha256 " + sha256 + ", " + blocks.size() + " network policies]";
    }
}
