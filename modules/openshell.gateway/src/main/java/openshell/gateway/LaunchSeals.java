package openshell.gateway;

import java.util.function.Supplier;

import openshell.driver.DriverException;
import openshell.protocol.TokenIssuer;

/** The gateway's launch sealer: bundles for the supervisor and the sandbox runtime. */
final class LaunchSeals {
    private LaunchSeals() {
    }

    /**
     * @param issuer     the gateway's signing key
     * @param gatewayUrl where supervisors open their session
     * @return the sealer
     */
    static LaunchSealer standard(TokenIssuer issuer, Supplier<String> gatewayUrl) {
        // The bundle format belongs to the supervisor and runtime mains (openshell.protocol.LaunchBundles).
        return (context, generation, epoch) -> {
            throw new DriverException(DriverException.Kind.UNAVAILABLE, "this build cannot seal launch bundles yet "
                    + "(openshell.protocol.LaunchBundles is not merged)");
        };
    }
}
