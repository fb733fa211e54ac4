package openshell.policy;

import openshell.isolation.DenyReason;

/** Why the engine refused. Every cause fails closed; the reason text says the rest. */
public enum DenyCause {
    /** The caller's identity could not be resolved. */
    IDENTITY_UNRESOLVED,
    /** No endpoint declares this host (and port). */
    NO_ENDPOINT,
    /** Endpoints declare the destination, but no block that holds one lists the calling binary. */
    BINARY_NOT_ALLOWED,
    /** A block would allow the binary's path, but its digest differs from the pinned one or is unknown. */
    DIGEST_MISMATCH,
    /** The address is of a class that is refused (loopback, link-local, metadata, or private and not declared exactly). */
    ADDRESS_REFUSED,
    /** A deny rule matched; it wins over every allow. */
    DENY_RULE,
    /** The connection is inspected and no rule allows this request. */
    NO_RULE,
    /** The request (host name, method or path) is malformed or refused by normalization. */
    MALFORMED_REQUEST,
    /** On re-check: the new generation would relay this connection differently (opaque versus inspected). */
    INSPECTION_CHANGED;

    /** @return the isolation contract's reason, which selects the errno inside the workload */
    public DenyReason isolationReason() {
        return this == IDENTITY_UNRESOLVED ? DenyReason.IDENTITY_UNRESOLVED : DenyReason.POLICY;
    }
}
