package openshell.supervisor;

import java.io.IOException;

/**
 * A message the L7 relay refuses to parse or to relay: malformed, ambiguous (the stuff request
 * smuggling is made of), too large, or a feature that would escape inspection. It carries the
 * status the workload is answered with; the message never quotes a header value.
 */
final class HttpParseException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int status;

    HttpParseException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** @return the HTTP status to answer with */
    int status() {
        return status;
    }
}
