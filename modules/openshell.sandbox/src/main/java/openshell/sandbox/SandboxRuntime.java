package openshell.sandbox;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.ByteChannel;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.isolation.WorkloadTrust;

/**
 * The runtime's lifecycle: attach, confirm, startAgent, then exec/await/signal/resize/terminate.
 * The agent's exit, for any reason, ends Running: every remaining workload process is killed
 * and later calls are refused, except await, which keeps returning the recorded status, and a
 * known process's session, whose recorded output stays readable.
 */
final class SandboxRuntime implements RuntimeControl, AutoCloseable {
    /** Most workload processes whose handles are retained (running or with an unread status). */
    static final int MAX_PROCESSES = 1024;
    /** Longest wait for a port forward's loopback connect inside the workload. */
    static final Duration PORT_FORWARD_CONNECT_WAIT = Duration.ofSeconds(10);

    /** A policy digest as the supervisor sends it. */
    private static final java.util.regex.Pattern SHA256_HEX = java.util.regex.Pattern.compile("[0-9a-f]{64}");

    enum State { SERVING, ATTACHED, CONFIRMED, RUNNING, ENDED }

    private final StartupProbes.Report probes;
    private final NetworkBroker broker;
    private final ProcessTree tree;
    private final String policySha256;
    private final Optional<TrustStoreView> trustView;
    /** Provider variables an update may carry. */
    static final int MAX_PROVIDER_VARIABLES = 64;
    /** Longest name or value of a provider variable (characters). */
    static final int MAX_PROVIDER_VARIABLE_CHARS = 4096;
    private static final java.util.regex.Pattern VARIABLE_NAME = java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    private Map<String, String> trustEnvironment = Map.of();
    private Map<String, String> providerEnvironment = Map.of();
    private long providerEpoch;
    private final Map<Long, WorkloadProcess> processes = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();
    private State state = State.SERVING;
    private String supervisor;
    private long generation;
    private long agent = -1;
    /** Execs between their slot check and their registration (guarded by this). */
    private int launching;
    private volatile boolean everSupervised;
    private volatile long supervisionEnded = -1;

    SandboxRuntime(StartupProbes.Report probes, NetworkBroker broker, ProcessTree tree, String policySha256) {
        this(probes, broker, tree, policySha256, Optional.empty());
    }

    /** With the trust store view of the runtime's own mount namespace (only its main has one to change). */
    SandboxRuntime(StartupProbes.Report probes, NetworkBroker broker, ProcessTree tree, String policySha256,
                   Optional<TrustStoreView> trustView) {
        this.probes = probes;
        this.broker = broker;
        this.tree = tree;
        this.policySha256 = policySha256;
        this.trustView = trustView;
    }

    synchronized State state() {
        return state;
    }

    private void require(State expected, String operation) {
        if (state == State.ENDED) {
            throw new BackendException(BackendException.Kind.TERMINATED, operation + ": the agent has ended");
        }
        if (state != expected) {
            throw new BackendException(BackendException.Kind.INVALID, operation + " in state " + state + ", expected " + expected);
        }
    }

    @Override
    public synchronized List<Long> attach(String supervisorInstance, long generation) {
        if (supervisorInstance == null || supervisorInstance.isBlank() || generation < 0) {
            throw new BackendException(BackendException.Kind.INVALID, "a supervisor instance and a generation are required");
        }
        if (state == State.ATTACHED || state == State.CONFIRMED || state == State.RUNNING) {
            // Exclusive: the boundary has its supervisor; a second one is refused, whoever asks.
            throw new BackendException(BackendException.Kind.DENIED, "attach: the runtime is already bound (state " + state + ")");
        }
        require(State.SERVING, "attach");
        this.supervisor = supervisorInstance;
        this.generation = generation;
        state = State.ATTACHED;
        return List.copyOf(processes.keySet());
    }

    @Override
    public synchronized ConfirmationEvidence confirm(String supervisorPolicyDigest) {
        require(State.ATTACHED, "confirm");
        String digest = policySha256;
        if (SandboxMain.POLICY_HELD_BY_SUPERVISOR.equals(policySha256)) {
            if (supervisorPolicyDigest == null || !SHA256_HEX.matcher(supervisorPolicyDigest).matches()) {
                throw new BackendException(BackendException.Kind.INVALID,
                        "confirm needs the SHA-256 of the policy the supervisor decides with");
            }
            digest = supervisorPolicyDigest;
        }
        List<ConfirmationEvidence.Control> controls = new ArrayList<>();
        controls.add(new ConfirmationEvidence.Control("network-mediation",
                "seccomp user notification per workload process; connect on the caller's own socket (pidfd_getfd) to a one-shot loopback relay; task memory via "
                        + probes.taskMemory() + (probes.waitKillable() ? "; WAIT_KILLABLE_RECV" : "")));
        controls.add(new ConfirmationEvidence.Control("dns", "relay on " + NetworkBroker.DNS_RELAY + " (UDP, TCP); resolv.conf bind-mounted read-only"));
        controls.add(new ConfirmationEvidence.Control("filesystem", "Landlock ABI " + probes.landlockAbi() + "; "
                + tree.confinement()));
        controls.add(new ConfirmationEvidence.Control("network-fence", "network namespace with " + probes.interfaces()
                + "; direct egress failed: " + probes.egressErrors()));
        controls.add(new ConfirmationEvidence.Control("privileges", "no_new_privs, empty capability and bounding sets, uid/gid != 0"));
        controls.add(new ConfirmationEvidence.Control("process-tree", "cgroup v2 leaf, cgroup.kill; runtime is child subreaper"));
        state = State.CONFIRMED;
        return new ConfirmationEvidence(controls, probes.kernel(), digest, !probes.egressErrors().isEmpty());
    }

    @Override
    public long startAgent(AgentSpec spec) {
        return startAgent(spec, WorkloadTrust.none());
    }

    @Override
    public long startAgent(AgentSpec spec, WorkloadTrust trust) {
        WorkloadProcess process;
        long id;
        synchronized (this) {
            require(State.CONFIRMED, "startAgent");
            // Once: a startAgent retried after a failed launch finds the view in place (and must not stack it).
            if (!trust.isEmpty() && trustEnvironment.isEmpty()) {
                // Before the agent exists, so no workload process ever sees the store without the CA.
                trustEnvironment = trustView.orElseThrow(() -> new BackendException(BackendException.Kind.FAILED,
                        "this runtime has no trust store view to install workload trust in")).install(trust).environment();
            }
            process = tree.start(new ProcessTree.LaunchRequest(spec.argv(), environment(spec.environment()),
                    spec.workingDirectory(), Optional.empty()));
            id = register(process);
            // Drained from the start: the agent never blocks on output nobody attached to read.
            process.retainOutput();
            agent = id;
            state = State.RUNNING;
        }
        process.exitFuture().whenComplete((status, failure) -> agentEnded());
        return id;
    }

    private void agentEnded() {
        synchronized (this) {
            state = State.ENDED;
        }
        tree.terminateAll();
    }

    /**
     * Launches outside the monitor: a launch can wait for its launcher, and signals,
     * attaches and other execs must not queue behind it. The slot is counted before the launch,
     * so {@link #MAX_PROCESSES} holds with launches in flight.
     */
    @Override
    public long exec(ExecSpec spec) {
        ProcessTree.LaunchRequest request;
        synchronized (this) {
            require(State.RUNNING, "exec");
            if (processes.size() + launching >= MAX_PROCESSES) {
                throw new BackendException(BackendException.Kind.UNAVAILABLE, MAX_PROCESSES + " processes retained");
            }
            // The provider placeholders first; the exec's own variables win over them.
            Map<String, String> env = new java.util.LinkedHashMap<>(providerEnvironment);
            env.putAll(spec.environment());
            request = new ProcessTree.LaunchRequest(spec.argv(), environment(env), spec.workingDirectory(), spec.terminal());
            launching++;
        }
        WorkloadProcess process;
        try {
            process = tree.start(request);
        } catch (RuntimeException e) {
            synchronized (this) {
                launching--;
            }
            throw e;
        }
        synchronized (this) {
            launching--;
            if (state != State.RUNNING) {
                // The agent ended once this exec was running (its tree was terminated, or is now):
                // the exec did start, so it is reported as started, with its output, and then as
                // ended with the sandbox, never as a launch that failed.
                process.terminate();
            }
            return register(process);
        }
    }

    @Override
    public synchronized long updateProviderEnvironment(Map<String, String> environment, long credentialEpoch) {
        if (state == State.ENDED) {
            throw new BackendException(BackendException.Kind.TERMINATED, "updateProviderEnvironment: the agent has ended");
        }
        if (state == State.SERVING) {
            throw new BackendException(BackendException.Kind.INVALID, "updateProviderEnvironment before attach");
        }
        if (credentialEpoch < 0) {
            throw new BackendException(BackendException.Kind.INVALID, "credential epoch " + Long.toUnsignedString(credentialEpoch)
                    + " is out of range");
        }
        if (environment.size() > MAX_PROVIDER_VARIABLES) {
            throw new BackendException(BackendException.Kind.INVALID, environment.size()
                    + " provider variables; at most " + MAX_PROVIDER_VARIABLES);
        }
        environment.forEach((name, value) -> {
            if (!VARIABLE_NAME.matcher(name).matches() || name.length() > MAX_PROVIDER_VARIABLE_CHARS) {
                throw new BackendException(BackendException.Kind.INVALID, "not a variable name: '"
                        + (name.length() > 64 ? name.substring(0, 64) + "..." : name) + "'");
            }
            if (value.length() > MAX_PROVIDER_VARIABLE_CHARS || value.indexOf('\0') >= 0) {
                // The value is never echoed: it should be a placeholder, but a bad caller may send a secret.
                throw new BackendException(BackendException.Kind.INVALID, "the value of " + name
                        + " is over " + MAX_PROVIDER_VARIABLE_CHARS + " characters or holds a NUL");
            }
        });
        if (credentialEpoch > providerEpoch) {
            providerEnvironment = Map.copyOf(environment);
            providerEpoch = credentialEpoch;
        }
        return providerEpoch;
    }

    private long register(WorkloadProcess process) {
        if (processes.size() >= MAX_PROCESSES) {
            process.terminate();
            throw new BackendException(BackendException.Kind.UNAVAILABLE, MAX_PROCESSES + " processes retained");
        }
        long id = ids.incrementAndGet();
        processes.put(id, process);
        return id;
    }

    private List<String> environment(Map<String, String> environment) {
        List<String> entries = new ArrayList<>();
        TrustStoreView.merged(environment, trustEnvironment).forEach((k, v) -> entries.add(k + "=" + v));
        return entries;
    }

    private WorkloadProcess process(long id) {
        WorkloadProcess p = processes.get(id);
        if (p == null) {
            throw new BackendException(BackendException.Kind.INVALID, "no process " + id);
        }
        return p;
    }

    /**
     * Also once the agent ended: an exec that ended with it (or was killed then) still has output
     * its caller has not read, and the supervisor may ask for it only now.
     */
    @Override
    public synchronized ExecSession session(long process) {
        requireStarted("session");
        return process(process);
    }

    @Override
    public synchronized Optional<OutputJournal.Pair> retainedOutput(long process) {
        requireStarted("attach");
        return process(process).retained();
    }

    /** Running, or ended after running: what was recorded then stays readable. */
    private void requireStarted(String operation) {
        if (state != State.RUNNING && state != State.ENDED) {
            throw new BackendException(BackendException.Kind.INVALID, operation + " in state " + state + ", expected "
                    + State.RUNNING);
        }
    }

    @Override
    public Optional<ExitStatus> await(long process, Duration timeout) {
        return process(process).awaitExit(timeout);
    }

    @Override
    public synchronized void signal(long process, ProcessSignal signal) {
        require(State.RUNNING, "signal");
        process(process).signal(signal);
    }

    @Override
    public synchronized void resize(long process, TerminalSize size) {
        require(State.RUNNING, "resize");
        process(process).resize(size);
    }

    @Override
    public ByteChannel portForward(int port) {
        synchronized (this) {
            require(State.RUNNING, "portForward");
        }
        if (port < 1 || port > 65535) {
            throw new BackendException(BackendException.Kind.INVALID, "port " + port + " is out of range");
        }
        try {
            // The socket is made on the namespace thread (a socket belongs to the network namespace
            // it was created in) and connected here: a connect that waits (a listener whose queue
            // is full) must not hold the one thread every spawn and forward of the workload needs.
            java.nio.channels.SocketChannel channel = broker.network().run(java.nio.channels.SocketChannel::open);
            java.net.Socket socket = channel.socket();
            try {
                socket.connect(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), port),
                        (int) PORT_FORWARD_CONNECT_WAIT.toMillis());
                socket.setTcpNoDelay(true);
            } catch (java.io.IOException | RuntimeException e) {
                channel.close();
                throw e;
            }
            return new RelayChannel(socket, () -> { });
        } catch (java.io.IOException | RuntimeException e) {
            if (e instanceof BackendException b) {
                throw b;
            }
            throw new BackendException(BackendException.Kind.FAILED, "nothing accepts on loopback port " + port + ": " + e.getMessage());
        }
    }

    @Override
    public void terminate() {
        synchronized (this) {
            if (state == State.ENDED) {
                return;
            }
            state = State.ENDED;
        }
        tree.terminateAll();
    }

    @Override
    public void supervision(boolean present) {
        if (present) {
            everSupervised = true;
            broker.supervisionTaken();
        } else {
            if (broker.supervised()) {
                supervisionEnded = System.nanoTime();
            }
            broker.supervisionLost();
        }
    }

    /**
     * When this runtime last had a supervisor taking its pending connections, from the control
     * plane itself: a supervision that began and ended between two looks of the main's watch
     * still counts (the watch samples every 200 ms and would take it for no contact at all).
     *
     * @return {@link System#nanoTime()} now while supervised, when it ended otherwise; empty if never
     */
    java.util.OptionalLong lastSupervised() {
        if (!everSupervised) {
            return java.util.OptionalLong.empty();
        }
        if (broker.supervised()) {
            return java.util.OptionalLong.of(System.nanoTime());
        }
        if (supervisionEnded < 0) {
            supervisionEnded = System.nanoTime();
        }
        return java.util.OptionalLong.of(supervisionEnded);
    }

    @Override
    public boolean supervised() {
        return broker.supervised();
    }

    @Override
    public NetworkMediationSource mediation() {
        return broker;
    }

    @Override
    public void askDnsDirectly(Optional<java.util.function.Consumer<openshell.isolation.PendingDnsQuery>> asker) {
        broker.askDnsDirectly(asker);
    }

    /** @return the agent's process id, once started */
    synchronized long agent() {
        return agent;
    }

    /** @return the pinned supervisor and generation */
    synchronized String attachedTo() {
        return supervisor + "@" + generation;
    }

    @Override
    public void close() {
        terminate();
        broker.close();
        tree.close();
    }
}
