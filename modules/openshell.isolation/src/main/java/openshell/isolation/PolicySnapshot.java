package openshell.isolation;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The whole effective policy a boundary must enforce, as the exact bytes that were validated, and
 * their SHA-256. Backends enforce the document itself, never a subset handed to them separately,
 * and report the digest they enforce in their {@link ConfirmationEvidence}.
 */
public final class PolicySnapshot {
    /** Largest policy document accepted. */
    public static final int MAX_DOCUMENT_BYTES = 1024 * 1024;

    private final long generation;
    private final byte[] document;
    private final String sha256;

    private PolicySnapshot(long generation, byte[] document) {
        this.generation = generation;
        this.document = document;
        this.sha256 = sha256(document);
    }

    /**
     * @param generation the policy generation, positive and increasing per sandbox
     * @param document   the validated policy document (copied)
     * @return the snapshot
     */
    public static PolicySnapshot of(long generation, byte[] document) {
        BackendException.require(document, "policy document");
        if (generation < 1) {
            throw BackendException.invalid("policy generation must be positive: " + generation);
        }
        if (document.length > MAX_DOCUMENT_BYTES) {
            throw BackendException.invalid("policy document of " + document.length + " bytes exceeds " + MAX_DOCUMENT_BYTES);
        }
        return new PolicySnapshot(generation, document.clone());
    }

    /** @return the generation */
    public long generation() {
        return generation;
    }

    /** @return a copy of the document */
    public byte[] document() {
        return document.clone();
    }

    /** @return the SHA-256 of the document, 64 lower-case hex digits */
    public String sha256() {
        return sha256;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PolicySnapshot p && p.generation == generation && p.sha256.equals(sha256);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(generation) * 31 + sha256.hashCode();
    }

    @Override
    public String toString() {
        return "PolicySnapshot[generation " + generation + ", sha256 " + sha256 + "]";
    }

    static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is mandatory in every JDK", e);
        }
    }
}
