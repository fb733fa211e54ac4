package openshell.gateway;

import openshell.driver.LaunchMaterial;
import openshell.isolation.SandboxContext;

/**
 * Mints and seals one launch's secrets (token pair, TLS material, the gateway's address and key)
 * into the two bundles a driver hands over unread. The gateway's signing key stays behind this
 * seam; the driver only ever sees opaque bytes.
 */
@FunctionalInterface
interface LaunchSealer {
    /**
     * @param context           the launch's isolation context
     * @param runtimeGeneration the launch's generation
     * @param credentialEpoch   the first epoch of the launch's tokens
     * @return the sealed bundles
     */
    LaunchMaterial seal(SandboxContext context, long runtimeGeneration, long credentialEpoch);
}
