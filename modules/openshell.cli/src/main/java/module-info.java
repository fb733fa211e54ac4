/**
 * The {@code openshell} command. For sandboxes it uses only the gateway's public REST API (and
 * starts the gateway program as a separate process), so everything it does can be done with curl
 * too. {@code policy check} and {@code policy explain} use the policy engine locally, because
 * checking a policy must not need a running gateway.
 *
 * <p>Exit codes: 0 success (for explain: allowed); 1 the operation failed (for check: the policy
 * has problems); 2 usage error; 3 the gateway is not running or not reachable; 4 no such sandbox;
 * 5 explain: denied.
 */
module openshell.cli {
    requires io.helidon.common;
    requires io.helidon.http;
    requires io.helidon.webclient;
    requires io.helidon.webclient.api;
    requires jakarta.json;
    requires openshell.policy;
}
