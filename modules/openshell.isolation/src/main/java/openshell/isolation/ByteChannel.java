package openshell.isolation;

import java.io.InputStream;
import java.io.OutputStream;

/**
 * Two byte streams that cross the boundary: a forwarded port or a mediated connection. Closing
 * the output half-closes; {@link #close()} releases both.
 */
public interface ByteChannel extends AutoCloseable {
    /** @return bytes coming out of the boundary */
    InputStream input();

    /** @return bytes going into the boundary */
    OutputStream output();

    /** Closes both directions. Idempotent. */
    @Override
    void close();
}
