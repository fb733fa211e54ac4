/**
 * End-to-end suites: the CLI and the gateway run as separate processes, exactly as a user runs
 * them, from the same module path this test runs on. The supervisor-session tests speak the
 * gateway's session protocol as an intruder would, hence the protocol's wire messages (a
 * qualified export, opened to this module by the build's {@code --add-exports}).
 */
open module openshell.tests.e2e {
    requires org.junit.jupiter.api;
    requires jakarta.json;
    requires java.net.http;
    requires openshell.protocol;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    requires io.helidon.common.tls;
    requires io.helidon.webclient.grpc;
}
