/**
 * The Sandbox Protocol between supervisor and sandbox runtime.
 */
module openshell.protocol {
    requires io.helidon.webserver;
    requires io.helidon.webserver.http2;
    requires io.helidon.webserver.grpc;
    requires io.helidon.webclient.api;
    requires io.helidon.webclient.http2;
    requires io.helidon.http;
    requires io.helidon.http.http2;
    requires io.helidon.http.media;
    requires io.helidon.http.encoding;
    requires io.helidon.common;
    requires io.helidon.common.buffers;
    requires io.helidon.common.context;
    requires io.helidon.common.socket;
    requires io.helidon.common.concurrency.limits;
    requires io.helidon.security.jwt;
    requires jakarta.json;
    requires io.grpc;
    requires io.grpc.stub;
    requires io.grpc.protobuf;
    requires com.google.protobuf;
    requires com.google.common;
    requires org.bouncycastle.pkix;
    requires org.bouncycastle.provider;
    requires jdk.net;

    // protobuf-java builds message accessors by reflection on the generated classes.
    opens openshell.protocol.wire to com.google.protobuf;
}
