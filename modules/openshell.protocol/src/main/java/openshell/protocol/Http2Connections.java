package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.ExecutorService;

import io.helidon.common.buffers.BufferData;
import io.helidon.common.buffers.DataReader;
import io.helidon.common.buffers.DataWriter;
import io.helidon.common.socket.HelidonSocket;
import io.helidon.common.socket.SocketWriter;
import io.helidon.common.tls.Tls;
import io.helidon.http.http2.WindowSize;
import io.helidon.webclient.api.ClientConnection;
import io.helidon.webclient.http2.Http2Client;
import io.helidon.webclient.http2.Http2ClientConnection;
import io.helidon.webclient.http2.Http2ClientImpl;
import io.helidon.webclient.http2.Http2ClientProtocolConfig;

/**
 * One Helidon HTTP/2 client connection (prior knowledge) over a socket we opened ourselves, the
 * way both the Sandbox Protocol link and the gateway connection need it: Helidon's own clients
 * dial per call and cannot take a given socket.
 */
final class Http2Connections {
    /**
     * The client's own TLS: none. Links bring their socket with TLS already up (or plain by
     * choice), and Helidon's default client TLS would load and parse the JDK's whole cacerts.
     */
    static final Tls NO_CLIENT_TLS = Tls.builder().enabled(false).build();

    private Http2Connections() {
    }

    /**
     * What {@link #open} made.
     *
     * @param client     the client the connection belongs to
     * @param connection the connection (preface and settings sent)
     * @param writer     the one writer of every frame (Helidon writes each frame as one call)
     * @param tap        where a call tells that its stream is closed, so late frames for it are dropped
     * @param windows    where a call gives its stream's receive window back (see {@link StreamWindows})
     */
    record Opened(Http2ClientImpl client, Http2ClientConnection connection, DataWriter writer, ForgottenStreamTap tap,
                  StreamWindows windows) {
    }

    /**
     * @param socket   the connected socket, TLS already up if any
     * @param id       the connection's name in logs
     * @param executor where Helidon runs the connection's reader
     * @param onClose  what Helidon's close of the resource does (the owner closes its socket)
     * @return the connection
     */
    static Opened open(HelidonSocket socket, String id, ExecutorService executor, Runnable onClose) {
        Http2ClientProtocolConfig protocol = Http2ClientProtocolConfig.builder()
                .priorKnowledge(true)
                // Helidon 4.1.7's client streams account their inbound window at the HTTP/2 default
                // whatever is advertised; advertising more lets the server overrun it and stall.
                .initialWindowSize(WindowSize.DEFAULT_WIN_SIZE)
                .maxFrameSize(ProtocolLimits.MAX_FRAME_BYTES)
                .ping(false)
                .build();
        Http2ClientImpl client = (Http2ClientImpl) Http2Client.create(builder -> builder
                // The socket is already what it must be (TLS up, or a plain one by choice). Without
                // this Helidon builds its default TLS for the client, which loads and parses the JDK's
                // whole cacerts (~250 ms of a cold supervisor's link thread at every sandbox start).
                .tls(NO_CLIENT_TLS)
                .protocolConfig(protocol)
                .shareConnectionCache(false)
                .executor(executor));
        SocketWriter socketWriter = SocketWriter.create(socket);
        // Helidon's own WINDOW_UPDATEs are dropped here: the calls give the windows back themselves
        // (StreamWindows). Helidon 4.1.7 skips (and so loses) the update of a stream whenever a
        // newer stream is open, so a long-lived stream's window ran dry for good.
        DataWriter writer = new DataWriter() {
            @Override
            public synchronized void write(BufferData... buffers) {
                socketWriter.write(buffers);
            }

            @Override
            public synchronized void write(BufferData buffer) {
                if (!StreamWindows.isWindowUpdate(buffer)) {
                    socketWriter.write(buffer);
                }
            }

            @Override
            public synchronized void writeNow(BufferData... buffers) {
                socketWriter.writeNow(buffers);
            }

            @Override
            public synchronized void writeNow(BufferData buffer) {
                socketWriter.writeNow(buffer);
            }
        };
        StreamWindows windows = new StreamWindows(frame -> {
            synchronized (writer) {
                socketWriter.write(frame);
            }
        }, ProtocolLimits.LINK_WINDOW_BYTES);
        ForgottenStreamTap tap = new ForgottenStreamTap(socket, windows::connectionRead);
        DataReader reader = new DataReader(tap);
        ClientConnection clientConnection = new ClientConnection() {
            @Override
            public DataReader reader() {
                return reader;
            }

            @Override
            public DataWriter writer() {
                return writer;
            }

            @Override
            public String channelId() {
                return id;
            }

            @Override
            public HelidonSocket helidonSocket() {
                return socket;
            }

            @Override
            public void readTimeout(Duration readTimeout) {
                // liveness is the owner's job (keepalive or its own writes), not a socket timeout
            }

            @Override
            public void closeResource() {
                onClose.run();
            }
        };
        Http2ClientConnection connection = Http2ClientConnection.create(client, clientConnection, true);
        // The preface is out (create waits for it): widen the connection window past the default.
        windows.open();
        return new Opened(client, connection, writer, tap, windows);
    }
}
