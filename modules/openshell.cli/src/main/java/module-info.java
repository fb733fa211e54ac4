/**
 * The {@code openshell} command. It uses only the gateway's public REST API (and starts the
 * gateway program as a separate process), so everything it does can be done with curl too.
 *
 * <p>Exit codes: 0 success; 1 the operation failed; 2 usage error; 3 the gateway is not running
 * or not reachable; 4 no such sandbox.
 */
module openshell.cli {
    requires io.helidon.common;
    requires io.helidon.http;
    requires io.helidon.webclient;
    requires io.helidon.webclient.api;
    requires jakarta.json;
}
