package openshell.protocol;

import java.util.Optional;

import io.helidon.common.buffers.BufferData;
import io.helidon.http.HeaderNames;
import io.helidon.http.HttpPrologue;
import io.helidon.http.http2.Http2FrameHeader;
import io.helidon.http.http2.Http2Headers;
import io.helidon.http.http2.Http2RstStream;
import io.helidon.http.http2.Http2Settings;
import io.helidon.http.http2.Http2StreamState;
import io.helidon.http.http2.Http2StreamWriter;
import io.helidon.http.http2.Http2WindowUpdate;
import io.helidon.http.http2.StreamFlowControl;
import io.helidon.webserver.ConnectionContext;
import io.helidon.webserver.Router;
import io.helidon.webserver.http2.spi.Http2SubProtocolSelector;
import io.helidon.webserver.http2.spi.SubProtocolResult;

/**
 * What the bearer check needs about a call, taken from the HTTP/2 stream itself: the link
 * it arrived on and its raw {@code authorization} header. Helidon 4.1.7's gRPC server hands
 * interceptors a {@code Metadata} whose values are the header names, not the values, so
 * the token is read here, in front of Helidon's gRPC selector, and made visible to the
 * interceptors while Helidon starts the call on this thread.
 *
 * @param link          the link the call arrived on
 * @param authorization the raw header, if any
 */
record CallScope(ServedLink link, Optional<String> authorization) {
    private static final ThreadLocal<CallScope> CURRENT = new ThreadLocal<>();

    static Optional<CallScope> current() {
        return Optional.ofNullable(CURRENT.get());
    }

    /** Wraps Helidon's gRPC selector so each stream's call starts inside its scope. */
    static Http2SubProtocolSelector around(Http2SubProtocolSelector grpc) {
        return (ConnectionContext ctx, HttpPrologue prologue, Http2Headers headers, Http2StreamWriter writer,
                int streamId, Http2Settings serverSettings, Http2Settings clientSettings, StreamFlowControl flowControl,
                Http2StreamState state, Router router) -> {
            SubProtocolResult result = grpc.subProtocol(ctx, prologue, headers, writer, streamId, serverSettings,
                    clientSettings, flowControl, state, router);
            if (!result.supported() || !(ctx instanceof ServedLink link)) {
                return result;
            }
            CallScope scope = new CallScope(link, headers.httpHeaders().first(HeaderNames.AUTHORIZATION));
            Http2SubProtocolSelector.SubProtocolHandler handler = result.subProtocol();
            return new SubProtocolResult(true, new Http2SubProtocolSelector.SubProtocolHandler() {
                @Override
                public void init() {
                    CURRENT.set(scope);
                    try {
                        handler.init();
                    } finally {
                        CURRENT.remove();
                    }
                }

                @Override
                public Http2StreamState streamState() {
                    return handler.streamState();
                }

                @Override
                public void rstStream(Http2RstStream rstStream) {
                    handler.rstStream(rstStream);
                }

                @Override
                public void windowUpdate(Http2WindowUpdate windowUpdate) {
                    handler.windowUpdate(windowUpdate);
                }

                @Override
                public void data(Http2FrameHeader header, BufferData data) {
                    handler.data(header, data);
                }
            });
        };
    }
}
