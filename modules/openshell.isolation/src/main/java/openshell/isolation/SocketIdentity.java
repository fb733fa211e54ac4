package openshell.isolation;

/**
 * The workload socket a request came from, so a decision is applied to exactly that socket and a
 * socket swapped in meanwhile (dup2 games) is detected.
 *
 * @param inode the socket's inode number, positive
 */
public record SocketIdentity(long inode) {
    /** Validates the inode. */
    public SocketIdentity {
        if (inode <= 0) {
            throw BackendException.invalid("socket inode must be positive: " + inode);
        }
    }
}
