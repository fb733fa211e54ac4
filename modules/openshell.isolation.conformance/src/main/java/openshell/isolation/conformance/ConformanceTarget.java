package openshell.isolation.conformance;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

import openshell.isolation.AgentSpec;
import openshell.isolation.BackendKey;
import openshell.isolation.BackendRegistry;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.RunningBoundary;
import openshell.isolation.TcpDestination;
import openshell.isolation.spi.IsolationBackendProvider;

import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.TestFactory;

/**
 * The one class a backend writes to be checked: how to launch a fresh boundary, and the probes
 * the invariant checks need. Implementing it in a test class is the whole plug-in: the default
 * {@link #isolationConformance()} method is a JUnit {@code @TestFactory} that runs every check.
 * Registered with {@code provides openshell.isolation.conformance.ConformanceTarget with ...} in
 * a test module, the same class also serves the command-line runner.
 *
 * <p>A probe is a program inside the boundary, given as its argv; the kit starts it with the
 * backend's own {@code exec}, so a probe can never take a path the workload could not take.
 * A backend that cannot supply a probe returns empty: the checks that need it then fail and say
 * why. Nothing is skipped.
 */
public interface ConformanceTarget {
    /** @return the exact backend under test, as admission names it */
    BackendKey backend();

    /** @return the provider under test, exactly as it is registered */
    IsolationBackendProvider backendProvider();

    /**
     * @return the registry the supervisor would use (normally {@link BackendRegistry#load()}); it
     *         must resolve {@link #backend()}
     */
    BackendRegistry registry();

    /**
     * Provisions a new, unbound execution environment, as the backend's compute driver would.
     *
     * @param agent the agent program the context must carry, unchanged
     * @return a descriptor for that environment and a context with a fresh session id
     */
    Launch freshLaunch(AgentSpec agent);

    /**
     * Releases what {@link #freshLaunch} provisioned, as the driver's trusted cleanup would. The
     * kit calls it for every launch when the check ends, after terminating or aborting whatever it
     * attached, including launches it never attached.
     *
     * @param launch a launch this target made
     */
    default void discard(Launch launch) {
    }

    /**
     * @return an absolute path to a POSIX shell inside the workload; the kit's own programs are
     *         {@code sh -c} scripts using only shell builtins, {@code sleep}, {@code cat} and
     *         {@code stty}
     */
    default String shell() {
        return "/bin/sh";
    }

    /**
     * A program that opens one ordinary TCP connection: it must exit 0 if {@code connect()}
     * succeeded and non-zero otherwise, and must not retry.
     *
     * @param destination where to connect
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> connectProbe(TcpDestination destination) {
        return Optional.empty();
    }

    /**
     * A program that sends one DNS query (type A, over UDP) for the given name to the workload's
     * resolver and waits for the response: exit 0 if any response arrived, non-zero otherwise.
     *
     * @param name the name to ask for; the kit recognises its query by it
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> dnsProbe(String name) {
        return Optional.empty();
    }

    /**
     * A program that tries to reach the destination around mediation by every path the backend
     * knows of (raw sockets, UDP, other address families, a host interface): exit 0 if any
     * reached it.
     *
     * @param destination a listener of the kit on {@link LoopbackOnly#GROUND_TRUTH}, an address of the
     *                    suite's own network namespace that only a workload outside its boundary reaches
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> directEgressProbe(TcpDestination destination) {
        return Optional.empty();
    }

    /**
     * A program whose TCP open the backend cannot attribute to a binary (for example one whose
     * executable vanished while it ran), exit codes as in {@link #connectProbe}.
     *
     * @param destination where to connect
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> unresolvedIdentityProbe(TcpDestination destination) {
        return Optional.empty();
    }

    /**
     * A program whose TCP open comes from an executable the backend cannot read, so no digest can
     * be computed; exit codes as in {@link #connectProbe}.
     *
     * @param destination where to connect
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> unreadableBinaryProbe(TcpDestination destination) {
        return Optional.empty();
    }

    /**
     * A program that attempts an action the launch's policy forbids in its static sections (for
     * example a write under a read-only path): exit 0 only if the action succeeded.
     *
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> policyForbiddenProbe() {
        return Optional.empty();
    }

    /**
     * A loopback echo service inside the boundary: it listens on a loopback port, prints
     * {@code listening <port>} as its first stdout line, echoes one connection until the peer
     * half-closes, then exits 0.
     *
     * @return its argv, or empty if the backend cannot supply one
     */
    default Optional<List<String>> loopbackEchoProbe() {
        return Optional.empty();
    }

    /**
     * @return the documented bound within which the backend terminates a workload whose
     *         supervisor is gone, or empty if it has none
     */
    default Optional<Duration> supervisorLossBound() {
        return Optional.empty();
    }

    /**
     * Makes the boundary lose its supervisor. The default closes the mediation source, which is
     * what the supervisor's side of the channel does when it goes away.
     *
     * @param running the boundary
     * @param source  its mediation source
     */
    default void loseSupervisor(RunningBoundary running, NetworkMediationSource source) {
        source.close();
    }

    /**
     * Every check of the kit against this target, as JUnit dynamic tests.
     *
     * @return the checks
     */
    @TestFactory
    default Stream<DynamicNode> isolationConformance() {
        return IsolationConformance.checks(this);
    }
}
