package openshell.gateway.store;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Objects;
import java.util.regex.Pattern;

import openshell.driver.Provisioned;
import openshell.gateway.GatewayException;
import openshell.isolation.SandboxId;

/**
 * One sandbox as the gateway persists it. {@code version} is the row version used for optimistic
 * concurrency between gateway replicas: an update names the version it read and loses if another
 * replica wrote first.
 *
 * @param id                the sandbox id
 * @param name              unique human name (a DNS label)
 * @param driver            the compute driver chosen by admission from trusted configuration
 * @param provisioned       what the driver provisioned: the descriptor (with the backend that must
 *                          attach it), the dial direction and the driver's own state
 * @param state             the recorded state
 * @param runtimeGeneration increases with every launch of the runtime
 * @param credentialEpoch   increases with every token refresh; a lower one is never accepted again
 * @param sessionLineage    the launch lineage tokens are bound to
 * @param policyGeneration  increases with every accepted policy
 * @param policyDocument    the accepted policy document (UTF-8 YAML)
 * @param version           row version, 1 when created
 * @param createdAt         when it was admitted
 * @param updatedAt         when it last changed
 */
public record SandboxRecord(SandboxId id, String name, String driver, Provisioned provisioned,
                            SandboxState state, long runtimeGeneration,
                            long credentialEpoch, String sessionLineage, long policyGeneration,
                            String policyDocument, long version, Instant createdAt, Instant updatedAt) {
    /** Largest policy document stored, in UTF-8 bytes. */
    public static final int MAX_POLICY_BYTES = 1024 * 1024;
    private static final Pattern LABEL = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
    private static final Pattern LINEAGE = Pattern.compile("[a-z2-7]{26}");

    /** Validates every field; a record that could not be written back is never built. */
    public SandboxRecord {
        Objects.requireNonNull(id, "id");
        label(name, "name");
        label(driver, "driver");
        Objects.requireNonNull(provisioned, "provisioned");
        Objects.requireNonNull(state, "state");
        Objects.requireNonNull(sessionLineage, "session lineage");
        Objects.requireNonNull(policyDocument, "policy document");
        Objects.requireNonNull(createdAt, "createdAt");
        Objects.requireNonNull(updatedAt, "updatedAt");
        if (!LINEAGE.matcher(sessionLineage).matches()) {
            throw invalid("session lineage must be a session id (26 characters of [a-z2-7])");
        }
        if (runtimeGeneration < 1 || credentialEpoch < 1 || policyGeneration < 1 || version < 1) {
            throw invalid("generations, epoch and version start at 1");
        }
        if (policyDocument.getBytes(StandardCharsets.UTF_8).length > MAX_POLICY_BYTES) {
            throw invalid("policy document exceeds " + MAX_POLICY_BYTES + " bytes");
        }
    }

    private static void label(String value, String what) {
        if (value == null || !LABEL.matcher(value).matches()) {
            throw invalid(what + " must be a lower-case DNS label: '" + value + "'");
        }
    }

    private static GatewayException invalid(String message) {
        return new GatewayException(GatewayException.Reason.INVALID, message);
    }

    /** @return the descriptor the driver wrote */
    public openshell.isolation.TopologyDescriptor descriptor() {
        return provisioned.descriptor();
    }

    /**
     * @param state the new state
     * @return a copy in that state
     */
    public SandboxRecord withState(SandboxState state) {
        return new SandboxRecord(id, name, driver, provisioned, state, runtimeGeneration, credentialEpoch,
                sessionLineage, policyGeneration, policyDocument, version, createdAt, updatedAt);
    }

    /**
     * @param generation the new policy generation, higher than the current one
     * @param document   the accepted document
     * @return a copy with that policy
     */
    public SandboxRecord withPolicy(long generation, String document) {
        if (generation <= policyGeneration) {
            throw invalid("policy generation must increase: " + generation + " after " + policyGeneration);
        }
        return new SandboxRecord(id, name, driver, provisioned, state, runtimeGeneration, credentialEpoch,
                sessionLineage, generation, document, version, createdAt, updatedAt);
    }

    /**
     * @param next what the driver returned for a new launch or a restart
     * @return a copy with it
     */
    public SandboxRecord withProvisioned(Provisioned next) {
        return new SandboxRecord(id, name, driver, next, state, runtimeGeneration, credentialEpoch,
                sessionLineage, policyGeneration, policyDocument, version, createdAt, updatedAt);
    }

    /**
     * A new launch: higher runtime generation, fresh lineage, epoch back to 1 for the new lineage.
     *
     * @param lineage the new launch's session id
     * @return a copy for the new launch
     */
    public SandboxRecord relaunched(String lineage) {
        return new SandboxRecord(id, name, driver, provisioned, state, runtimeGeneration + 1, 1,
                lineage, policyGeneration, policyDocument, version, createdAt, updatedAt);
    }
}
