package openshell.protocol;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What the supervisor learns from its launch bundle, validated: the pin of the runtime's TLS
 * identity, the token pair it presents, the policy, the agent to start, the workload identity and
 * the provider credentials. {@link #toString()} names no token and no secret.
 *
 * @param sandboxId       the sandbox
 * @param sessionId       the session
 * @param generation      the runtime generation
 * @param sessionLineage  the session lineage the tokens carry
 * @param pin             the runtime's launch CA, for its server name only
 * @param tokens          both tokens of the first credential epoch
 * @param policyYaml      the policy as the gateway admitted it (UTF-8)
 * @param agent           what the runtime starts as the agent
 * @param workloadUid     the workload's user id (never 0)
 * @param workloadGid     the workload's group id (never 0)
 * @param credentials     provider credentials, by name
 * @param gatewayEndpoint the gateway's session endpoint, if the launch has one
 * @param hostAliases     operator host aliases (trusted gateway configuration): name to address
 * @param upstreamAuthorities extra trust anchors for upstream TLS (trusted gateway configuration)
 * @param upstreamResolver the DNS server asked instead of the host's resolver (trusted gateway configuration)
 */
public record SupervisorBundle(String sandboxId, String sessionId, long generation, String sessionLineage,
                               TlsPin pin, TokenPair tokens, byte[] policyYaml, LaunchBundles.Agent agent,
                               int workloadUid, int workloadGid, List<LaunchBundles.Credential> credentials,
                               Optional<String> gatewayEndpoint, Map<String, InetAddress> hostAliases,
                               List<X509Certificate> upstreamAuthorities, Optional<InetSocketAddress> upstreamResolver) {
    /**
     * Canonical constructor.
     *
     * @param sandboxId       sandbox
     * @param sessionId       session
     * @param generation      generation
     * @param sessionLineage  lineage
     * @param pin             pin
     * @param tokens          tokens
     * @param policyYaml      policy (copied)
     * @param agent           agent
     * @param workloadUid     uid
     * @param workloadGid     gid
     * @param credentials     credentials
     * @param gatewayEndpoint endpoint
     * @param hostAliases     host aliases
     * @param upstreamAuthorities upstream trust anchors
     * @param upstreamResolver    the operator's DNS server, if any
     */
    public SupervisorBundle {
        Objects.requireNonNull(sandboxId);
        Objects.requireNonNull(sessionId);
        Objects.requireNonNull(sessionLineage);
        Objects.requireNonNull(pin);
        Objects.requireNonNull(tokens);
        policyYaml = policyYaml.clone();
        Objects.requireNonNull(agent);
        credentials = List.copyOf(credentials);
        Objects.requireNonNull(gatewayEndpoint);
        hostAliases = java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(hostAliases));
        upstreamAuthorities = List.copyOf(upstreamAuthorities);
        Objects.requireNonNull(upstreamResolver);
    }

    /**
     * The policy bytes.
     *
     * @return a copy
     */
    @Override
    public byte[] policyYaml() {
        return policyYaml.clone();
    }

    /**
     * The credentials by name.
     *
     * @return name to credential
     */
    public Map<String, LaunchBundles.Credential> credentialsByName() {
        return credentials.stream().collect(java.util.stream.Collectors.toUnmodifiableMap(
                LaunchBundles.Credential::name, c -> c));
    }

    @Override
    public String toString() {
        return "SupervisorBundle[sandbox=" + sandboxId + ", session=" + sessionId + ", generation=" + generation
                + ", " + tokens + ", policy=" + policyYaml.length + " bytes, agent=" + agent.argv().getFirst()
                + ", credentials=" + credentials.stream().map(LaunchBundles.Credential::name).toList()
                + ", gateway=" + gatewayEndpoint.orElse("none") + ", aliases=" + hostAliases.keySet()
                + ", upstreamAuthorities=" + upstreamAuthorities.size()
                + ", resolver=" + upstreamResolver.map(Object::toString).orElse("host") + "]";
    }
}
