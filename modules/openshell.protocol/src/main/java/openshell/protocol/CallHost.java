package openshell.protocol;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutorService;

import io.helidon.common.socket.HelidonSocket;
import io.helidon.webclient.http2.Http2ClientConnection;
import io.helidon.webclient.http2.Http2ClientImpl;

/**
 * The one HTTP/2 client connection a {@link LinkCall} runs its stream on: the Sandbox Protocol's
 * link to the runtime, or the supervisor's connection to its gateway. Both need the same client,
 * because Helidon 4.1.7's own gRPC client takes each DATA frame for one whole message and fails
 * on a message the server had to split (a window running short, or anything over 16 KiB).
 */
interface CallHost {
    /** @return whether the connection is still up */
    boolean isOpen();

    /** @return why it closed, if it has */
    Optional<Refusal> closedFor();

    /**
     * @return the bearer token for the next call's {@code authorization} header, or empty when
     *         the service authenticates in-band
     * @throws ProtocolException when a token is needed and none is valid
     */
    Optional<String> bearer();

    /** @return a stream slot for a new call, or false when the connection has as many as it allows */
    boolean takeStream();

    /** Gives a slot back. */
    void returnStream();

    /** @return the {@code :authority} of every call */
    String authority();

    /** @return the {@code :scheme} of every call */
    String scheme();

    /** @return where calls read their responses */
    ExecutorService executor();

    /** Runs a task after a delay (deadlines); runs it now if the host is shut down. */
    void schedule(Duration delay, Runnable task);

    /** @return Helidon's connection */
    Http2ClientConnection connection();

    /** @return its socket */
    HelidonSocket helidonSocket();

    /** @return the client it belongs to */
    Http2ClientImpl http2Client();

    /**
     * A call closed its stream: late frames for it are dropped before Helidon sees them
     * ({@link ForgottenStreamTap}).
     *
     * @param streamId the stream
     */
    void forget(int streamId);

    /** @return where calls give their streams' receive windows back */
    StreamWindows windows();
}
