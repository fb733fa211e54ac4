package openshell.isolation;

/** Opens byte streams to loopback services inside a running boundary. */
public interface BoundaryPortForward {
    /**
     * @param target a loopback port inside the boundary
     * @return the connection
     * @throws BackendException FAILED if nothing listens there; TERMINATED if the boundary ended
     */
    ByteChannel connect(LoopbackTarget target);
}
