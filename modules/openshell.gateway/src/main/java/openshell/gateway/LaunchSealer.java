package openshell.gateway;

import java.util.List;

import openshell.driver.LaunchMaterial;
import openshell.isolation.SandboxContext;
import openshell.protocol.LaunchBundles;

/**
 * Mints and seals one launch's secrets (token pair, TLS material, the gateway's address and key,
 * provider credentials) into the two bundles a driver hands over unread. The gateway's signing key
 * stays behind this seam; the driver only ever sees opaque bytes.
 */
@FunctionalInterface
interface LaunchSealer {
    /**
     * @param context           the launch's isolation context
     * @param runtimeGeneration the launch's generation
     * @param credentialEpoch   the first epoch of the launch's tokens
     * @param credentials       the attached providers' secrets (supervisor bundle only)
     * @return the sealed bundles
     */
    LaunchMaterial seal(SandboxContext context, long runtimeGeneration, long credentialEpoch,
                        List<LaunchBundles.Credential> credentials);
}
