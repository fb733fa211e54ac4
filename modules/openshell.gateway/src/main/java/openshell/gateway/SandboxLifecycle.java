package openshell.gateway;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverRegistry;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.gateway.GatewayException.Reason;
import openshell.gateway.store.ProviderRecord;
import openshell.gateway.store.ProviderStore;
import openshell.gateway.store.SandboxRecord;
import openshell.gateway.store.SandboxState;
import openshell.gateway.store.SandboxStore;
import openshell.isolation.AgentSpec;
import openshell.isolation.PolicySnapshot;
import openshell.isolation.SandboxContext;
import openshell.isolation.SandboxId;
import openshell.isolation.SandboxSessionId;
import openshell.isolation.WorkloadIdentity;
import openshell.policy.Policy;
import openshell.policy.PolicyProblem;
import openshell.protocol.LaunchBundles;
import openshell.protocol.wire.PolicyOutcome;

/**
 * Admission and the life of a sandbox: create, stop, start, delete, observe, policy set. The
 * driver is the one trusted configuration names ({@link GatewayConfig#defaultDriver()}); nothing in
 * a request can choose it, or the topology, or the workload identity. Every launch gets a fresh
 * session lineage, a higher runtime generation and its own token pair.
 *
 * <p>Among replicas, a sandbox is created under a lease this replica takes for its new id, and
 * stop, start, delete and the observer's cleanup act only under this replica's lease, confirmed
 * in the database right before the driver is called ({@link Replicas}); the API forwards an
 * operation on a sandbox another replica manages to that replica.
 */
final class SandboxLifecycle {
    /** The unprivileged identity a workload runs as inside its user namespace when its policy names none. */
    static final WorkloadIdentity WORKLOAD = WorkloadIdentity.of(StaticSections.DEFAULT_ID, StaticSections.DEFAULT_ID);
    private static final char[] ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567".toCharArray();
    private static final int ID_RANDOM_CHARS = 12;

    private final SandboxStore store;
    private final ProviderStore providers;
    private final DriverRegistry drivers;
    private final DriverEnvironment driverEnvironment;
    private final String driverName;
    private final LaunchSealer sealer;
    private final SessionHub sessions;
    private final java.util.Map<String, ComputeDriver> live = new java.util.concurrent.ConcurrentHashMap<>();
    private final SecureRandom random = new SecureRandom();
    private final ConcurrentHashMap<String, Long> sentGenerations = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Object> policyLocks = new ConcurrentHashMap<>();
    private final Transitions transitions = new Transitions();
    private final Replicas replicas;

    SandboxLifecycle(SandboxStore store, ProviderStore providers, DriverRegistry drivers,
                     DriverEnvironment driverEnvironment, String driverName, LaunchSealer sealer, SessionHub sessions) {
        this(store, providers, drivers, driverEnvironment, driverName, sealer, sessions, sessions.replicas());
    }

    SandboxLifecycle(SandboxStore store, ProviderStore providers, DriverRegistry drivers,
                     DriverEnvironment driverEnvironment, String driverName, LaunchSealer sealer, SessionHub sessions,
                     Replicas replicas) {
        this.replicas = replicas;
        this.store = store;
        this.providers = providers;
        this.drivers = drivers;
        this.driverEnvironment = driverEnvironment;
        this.driverName = driverName;
        this.sealer = sealer;
        this.sessions = sessions;
        try {
            // Made now, not at the first create: a driver may start work ahead of it (warm spares).
            live(driverName);
        } catch (RuntimeException e) {
            // Reported by the first create, as before; the gateway still serves everything else.
            System.err.println("openshell gateway: the " + driverName + " driver is not ready: " + e.getMessage());
        }
    }

    /** One instance per driver name for the gateway's life, closed with it. */
    private ComputeDriver live(String name) {
        return live.computeIfAbsent(name, n -> drivers.driver(n, driverEnvironment));
    }

    /** @return this gateway's part among the replicas */
    Replicas replicas() {
        return replicas;
    }

    /**
     * @return this replica's grant for the sandbox, taken now if nobody holds its lease
     * @throws GatewayException UNAVAILABLE when another replica manages it
     */
    private Replicas.Grant managed(SandboxRecord record) {
        return replicas.manage(record.id()).orElseThrow(() -> new GatewayException(Reason.UNAVAILABLE, "sandbox "
                + record.name() + " is managed by " + replicas.manager(record.id()).map(m -> "replica " + m.replica()
                + " at " + m.apiUrl()).orElse("another replica, whose lease lapses within " + Replicas.TAKEOVER_BOUND)
                + "; retry"));
    }

    /** Closes the drivers: their warm spares end; sandboxes are not touched. */
    void close() {
        for (ComputeDriver driver : live.values()) {
            try {
                driver.close();
            } catch (RuntimeException e) {
                System.err.println("openshell gateway: closing the " + driver.name() + " driver: " + e.getMessage());
            }
        }
        live.clear();
    }

    /**
     * @param document a policy document
     * @return every problem of it; empty when it is valid
     */
    static List<PolicyProblem> problems(String document) {
        return Policy.check(document.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Checks a driver a request named: the gateway's trusted configuration decides which driver
     * runs its sandboxes, so a request may confirm it but never pick another.
     *
     * @param requested the driver the request named
     * @throws GatewayException INVALID for any other driver, saying which one this gateway runs
     */
    void requireDriver(String requested) {
        if (!driverName.equals(requested)) {
            throw new GatewayException(Reason.INVALID, "this gateway runs sandboxes on the '" + driverName
                    + "' driver, not '" + requested + "': its own configuration decides (gateway start --driver NAME)");
        }
    }

    /**
     * Admits and launches a sandbox. Nothing is left behind when it fails.
     *
     * @param name   the requested name, or empty for one derived from the id
     * @param policy the policy document, already free of problems
     * @param spec   the agent, workspace and providers
     * @return the record, PROVISIONING until its supervisor opens its session
     */
    SandboxRecord create(String name, String policy, LaunchSpec spec) {
        requireValid(policy);
        SandboxId id = new SandboxId("sb-" + randomLabel());
        // Leased before anything exists: no other replica can act on it while it is made.
        Replicas.Grant grant = replicas.manage(id).orElseThrow(() -> new GatewayException(Reason.UNAVAILABLE,
                "replica " + replicas.id() + " cannot take a lease (is it being replaced?)"));
        Runnable done = transitions.begin(id);
        boolean recorded = false;
        try {
            SandboxRecord record = create(id, name, policy, spec, grant);
            recorded = true;
            return record;
        } finally {
            done.run();
            if (!recorded) {
                replicas.abandon(id);
            }
        }
    }

    private SandboxRecord create(SandboxId id, String name, String policy, LaunchSpec spec, Replicas.Grant grant) {
        String chosen = name.isEmpty() ? id.value() : name;
        if (store.findByName(chosen).isPresent()) {
            throw new GatewayException(Reason.CONFLICT, "a sandbox named '" + chosen + "' already exists");
        }
        AgentSpec agent = withProviders(spec);
        ComputeDriver driver = live(driverName);
        String lineage = SandboxSessionId.fresh().value();
        SandboxContext context = new SandboxContext(id, new SandboxSessionId(lineage),
                PolicySnapshot.of(1, policy.getBytes(StandardCharsets.UTF_8)), agent,
                StaticSections.workload(StaticSections.admitted(policy)));
        LaunchPlan plan = new LaunchPlan(context, 1, sealer.seal(context, 1, 1, credentials(spec)), spec.driverOptions());
        replicas.check(grant);
        Provisioned provisioned = driver.create(plan);
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        try {
            SandboxRecord record = store.create(new SandboxRecord(id, chosen, driverName, provisioned,
                    SandboxState.PROVISIONING, 1, 1, lineage, 1, policy, 1, now, now));
            store.saveLaunchSpec(id, spec.toJson());
            sessions.note(id, "created with driver " + driverName + " (runtime generation 1)");
            return record;
        } catch (RuntimeException e) {
            try {
                driver.delete(id, provisioned.state());
                store.delete(id);
            } catch (RuntimeException cleanup) {
                e.addSuppressed(cleanup);
            }
            throw e;
        }
    }

    /** Stops every process of the sandbox, keeping its workspace and record. */
    SandboxRecord stop(SandboxRecord record) {
        Replicas.Grant grant = managed(record);
        Runnable done = transitions.begin(record.id());
        try {
            return stopping(record, grant);
        } finally {
            done.run();
        }
    }

    private SandboxRecord stopping(SandboxRecord record, Replicas.Grant grant) {
        replicas.confirm(grant);
        sessions.disconnect(record.id());
        driver(record).stop(record.id(), record.provisioned().state());
        sessions.note(record.id(), "stopped");
        // The state alone: the session's last epoch refresh may have moved the record since it was read.
        return store.setState(record.id(), SandboxState.STOPPED);
    }

    /** Launches a stopped sandbox again: new lineage, next generation, epoch 1 of that lineage. */
    SandboxRecord start(SandboxRecord record) {
        Replicas.Grant grant = managed(record);
        Runnable done = transitions.begin(record.id());
        try {
            return starting(record, grant);
        } finally {
            done.run();
        }
    }

    private SandboxRecord starting(SandboxRecord record, Replicas.Grant grant) {
        if (record.state() != SandboxState.STOPPED && record.state() != SandboxState.FAILED) {
            throw new GatewayException(Reason.CONFLICT, "sandbox " + record.name() + " is " + record.state()
                    + "; only a STOPPED or FAILED sandbox can be started");
        }
        LaunchSpec spec = LaunchSpec.fromJson(store.launchSpec(record.id()).orElseThrow(() ->
                new GatewayException(Reason.NOT_FOUND, "sandbox " + record.name() + " has no launch specification")));
        String lineage = SandboxSessionId.fresh().value();
        SandboxRecord next = record.relaunched(lineage);
        SandboxContext context = new SandboxContext(record.id(), new SandboxSessionId(lineage),
                PolicySnapshot.of(next.policyGeneration(), next.policyDocument().getBytes(StandardCharsets.UTF_8)),
                withProviders(spec), StaticSections.workload(StaticSections.admitted(record.policyDocument())));
        LaunchPlan plan = new LaunchPlan(context, next.runtimeGeneration(),
                sealer.seal(context, next.runtimeGeneration(), 1, credentials(spec)), spec.driverOptions());
        replicas.confirm(grant);
        Provisioned provisioned = driver(record).start(record.id(), record.provisioned().state(), plan);
        sessions.note(record.id(), "started (runtime generation " + next.runtimeGeneration() + ")");
        return store.update(next.withProvisioned(provisioned).withState(SandboxState.PROVISIONING));
    }

    /** The trusted cleanup path: the driver removes everything, supervisor or not, then the record goes. */
    void delete(SandboxRecord record) {
        Replicas.Grant grant = managed(record);
        Runnable done = transitions.begin(record.id());
        try {
            deleting(record, grant);
        } finally {
            done.run();
        }
    }

    private void deleting(SandboxRecord record, Replicas.Grant grant) {
        replicas.confirm(grant);
        // The state alone, so a delete right after Running does not fail on the session's first epoch refresh.
        store.setState(record.id(), SandboxState.DELETING);
        sessions.disconnect(record.id());
        driver(record).delete(record.id(), record.provisioned().state());
        store.delete(record.id());
        replicas.forget(record.id());
        sentGenerations.remove(record.id().value());
        policyLocks.remove(record.id().value());
    }

    /** @return what the driver observes of the sandbox now */
    DriverStatus observe(SandboxRecord record) {
        try {
            return driverStatus(record);
        } catch (DriverException e) {
            return new DriverStatus(DriverStatus.Phase.DEGRADED, "the driver cannot tell: " + e.getMessage());
        }
    }

    /**
     * @return what the driver observes of the sandbox now
     * @throws DriverException when it cannot tell (the observer then changes nothing)
     */
    DriverStatus driverStatus(SandboxRecord record) {
        replicas.check(managed(record));
        return driver(record).status(record.id(), record.provisioned().state());
    }

    /**
     * The observer's trusted cleanup of a workload nothing else will end: the driver stops every
     * process of the sandbox, keeping what start needs; the caller records why.
     */
    void terminate(SandboxRecord record) {
        replicas.confirm(managed(record));
        sessions.disconnect(record.id(), "the gateway stops what is left of the sandbox");
        driver(record).stop(record.id(), record.provisioned().state());
    }

    /** @return the operations in progress, which the observer must not judge a sandbox during */
    Transitions transitions() {
        return transitions;
    }

    /**
     * Sends a new policy to the supervisor, waits for its verdict, and records the policy only if
     * the supervisor loaded it.
     *
     * @return the supervisor's outcome; the record changed only on LOADED
     */
    PolicyOutcome setPolicy(SandboxRecord record, String document) {
        requireValid(document);
        Sent sent = send(record, document);
        PolicyOutcome outcome;
        try {
            outcome = sent.verdict().get();
        } catch (ExecutionException e) {
            GatewayException why = SessionHub.unanswered(record.id(), e.getCause());
            sessions.note(record.id(), "policy generation " + sent.generation() + " not answered: " + why.getMessage());
            throw why;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new GatewayException(Reason.UNAVAILABLE, "interrupted");
        }
        recordOutcome(record, sent.generation(), document, outcome);
        return outcome;
    }

    /** A revision on its way: its generation and the supervisor's verdict to come. */
    private record Sent(long generation, CompletableFuture<PolicyOutcome> verdict) {
    }

    /**
     * Takes the next generation and sends the revision under one lock: two policy sets at once
     * must neither share a generation nor reach the supervisor in the other order than their
     * generations (the supervisor applies what arrives last; the record keeps the highest LOADED).
     */
    private Sent send(SandboxRecord record, String document) {
        synchronized (policyLock(record)) {
            long generation = sentGenerations.merge(record.id().value(), record.policyGeneration() + 1,
                    (sent, proposed) -> Math.max(sent + 1, proposed));
            return new Sent(generation, sessions.sendPolicy(record.id(), generation,
                    document.getBytes(StandardCharsets.UTF_8)));
        }
    }

    /** One lock per sandbox for its policy revisions (others are never held up). */
    private Object policyLock(SandboxRecord record) {
        return policyLocks.computeIfAbsent(record.id().value(), k -> new Object());
    }

    /**
     * Sends a new policy to the supervisor without waiting; its verdict is recorded (and logged)
     * when it comes: the record changes only on LOADED.
     *
     * @return the policy generation sent
     */
    long sendPolicy(SandboxRecord record, String document) {
        requireValid(document);
        Sent sent = send(record, document);
        long generation = sent.generation();
        // Recorded off the session's thread, which delivered the verdict: it must never wait for
        // the policy lock that a sender holds while its write waits for that same connection.
        sent.verdict().whenCompleteAsync((o, e) -> {
            if (e != null) {
                sessions.note(record.id(), "policy generation " + generation + " not answered: "
                        + SessionHub.unanswered(record.id(), e).getMessage());
                return;
            }
            try {
                recordOutcome(record, generation, document, o);
            } catch (RuntimeException failure) {
                sessions.note(record.id(), "policy generation " + generation + " loaded but not recorded: "
                        + failure.getMessage());
            }
        }, task -> Thread.ofVirtual().name("policy-verdict").start(task));
        sessions.note(record.id(), "policy generation " + generation + " sent");
        return generation;
    }

    // Synchronized: the record keeps the highest generation the supervisor loaded, whatever order
    // the verdicts arrive in (the supervisor applies revisions in the order they were sent).
    private void recordOutcome(SandboxRecord record, long generation, String document, PolicyOutcome outcome) {
        synchronized (policyLock(record)) {
            recordLocked(record, generation, document, outcome);
        }
    }

    private void recordLocked(SandboxRecord record, long generation, String document, PolicyOutcome outcome) {
        if (outcome.getResult() == PolicyOutcome.Result.LOADED) {
            SandboxRecord current = store.find(record.id()).orElseThrow(() ->
                    new GatewayException(Reason.NOT_FOUND, "sandbox " + record.name() + " was deleted"));
            if (current.policyGeneration() >= generation) {
                sessions.note(record.id(), "policy generation " + generation + " LOADED, already superseded by generation "
                        + current.policyGeneration());
                return;
            }
            store.update(current.withPolicy(generation, document));
            sessions.note(record.id(), "policy generation " + generation + " LOADED");
        } else {
            sessions.note(record.id(), "policy generation " + generation + " FAILED: " + outcome.getMessage()
                    + "; the previous policy stays in force");
        }
    }

    private ComputeDriver driver(SandboxRecord record) {
        // The record names the driver that provisioned it: cleanup must reach that one, whatever today's default.
        return live(record.driver());
    }

    /**
     * The credential placeholders of the sandbox's providers, as its agent got them, so that an
     * exec into the sandbox sees them too (never a value: the supervisor swaps those in on
     * admitted requests). A provider deleted since the launch is left out.
     *
     * @param record the sandbox
     * @return environment variable to placeholder
     */
    Map<String, String> providerPlaceholders(SandboxRecord record) {
        Map<String, String> env = new LinkedHashMap<>();
        store.launchSpec(record.id()).map(LaunchSpec::fromJson).ifPresent(spec -> spec.providers().forEach(name ->
                providers.find(name).ifPresent(p -> env.put(p.envVar(), p.placeholder()))));
        return env;
    }

    private AgentSpec withProviders(LaunchSpec spec) {
        Map<String, String> env = new LinkedHashMap<>(spec.agent().environment());
        for (String name : spec.providers()) {
            ProviderRecord p = providers.find(name).orElseThrow(() -> new GatewayException(Reason.INVALID,
                    "no provider named '" + name + "' (openshell provider list)"));
            // The agent sees only the placeholder; the supervisor swaps in the value on admitted requests.
            env.put(p.envVar(), p.placeholder());
        }
        return new AgentSpec(spec.agent().argv(), env, spec.agent().workingDirectory());
    }

    /** The attached providers' values, for the supervisor's bundle only; zeroed copies never linger here. */
    private List<LaunchBundles.Credential> credentials(LaunchSpec spec) {
        List<LaunchBundles.Credential> out = new java.util.ArrayList<>();
        for (String name : spec.providers()) {
            ProviderRecord p = providers.find(name).orElseThrow(() -> new GatewayException(Reason.INVALID,
                    "no provider named '" + name + "' (openshell provider list)"));
            byte[] secret = providers.secret(name);
            try {
                out.add(new LaunchBundles.Credential(name, secret, p.hosts()));
            } finally {
                java.util.Arrays.fill(secret, (byte) 0);
            }
        }
        return out;
    }

    private static void requireValid(String policy) {
        List<PolicyProblem> problems = problems(policy);
        if (!problems.isEmpty()) {
            throw new GatewayException(Reason.INVALID, "the policy has " + problems.size() + " problem(s): "
                    + problems.stream().map(PolicyProblem::toString).collect(Collectors.joining("; ")));
        }
    }

    private String randomLabel() {
        StringBuilder b = new StringBuilder(ID_RANDOM_CHARS);
        for (int i = 0; i < ID_RANDOM_CHARS; i++) {
            b.append(ID_ALPHABET[random.nextInt(ID_ALPHABET.length)]);
        }
        return b.toString();
    }
}
