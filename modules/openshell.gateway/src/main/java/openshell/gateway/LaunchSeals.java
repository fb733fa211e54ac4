package openshell.gateway;

import java.nio.charset.StandardCharsets;
import java.util.function.Supplier;

import openshell.driver.LaunchMaterial;
import openshell.protocol.LaunchBundles;
import openshell.protocol.ProtocolException;
import openshell.protocol.TokenIssuer;

/** The gateway's launch sealer: {@link LaunchBundles} over the gateway's persisted signing key. */
final class LaunchSeals {
    private LaunchSeals() {
    }

    /**
     * @param issuer     the gateway's signing key
     * @param gatewayUrl where supervisors open their session
     * @return the sealer, without operator network configuration
     */
    static LaunchSealer standard(TokenIssuer issuer, Supplier<String> gatewayUrl) {
        return standard(issuer, gatewayUrl, OperatorNetwork.none());
    }

    /**
     * @param issuer     the gateway's signing key
     * @param gatewayUrl where supervisors open their session
     * @param network    the operator's host aliases and upstream trust anchors, for every supervisor bundle
     * @return the sealer
     */
    static LaunchSealer standard(TokenIssuer issuer, Supplier<String> gatewayUrl, OperatorNetwork network) {
        return (context, generation, epoch, credentials) -> {
            try {
                LaunchBundles.Request.Builder request = LaunchBundles.Request.builder()
                        .sandboxId(context.sandboxId().value())
                        .sessionId(context.sessionId().value())
                        .sessionLineage(context.sessionId().value())
                        .generation(generation)
                        .policyYaml(new String(context.policy().document(), StandardCharsets.UTF_8))
                        .agent(new LaunchBundles.Agent(context.agent().argv(), context.agent().environment(),
                                context.agent().workingDirectory()))
                        .workload(context.workload().uid(), context.workload().gid())
                        .confinement(StaticSections.confinement(context))
                        .gatewayEndpoint(gatewayUrl.get())
                        .tokenLifetime(SessionHub.TOKEN_LIFETIME);
                credentials.forEach(request::addCredential);
                network.applyTo(request);
                LaunchBundles.Minted minted = LaunchBundles.mint(request.build(), issuer, epoch);
                return LaunchMaterial.of(minted.supervisorBundle(), minted.runtimeBundle());
            } catch (ProtocolException e) {
                throw new GatewayException(GatewayException.Reason.INVALID, "cannot seal the launch: " + e.getMessage(), e);
            }
        };
    }
}
