package openshell.isolation.conformance.selftest;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import openshell.isolation.BackendException;
import openshell.isolation.BackendException.Kind;
import openshell.isolation.BackendKey;
import openshell.isolation.BoundBoundary;
import openshell.isolation.BoundaryExec;
import openshell.isolation.BoundaryPortForward;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ByteChannel;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.IsolationBackend;
import openshell.isolation.LoopbackTarget;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.SandboxContext;
import openshell.isolation.VerifiedTopologyDescriptor;
import openshell.isolation.spi.LinearHandle;

/**
 * A test double of an isolation backend: the workload is ordinary child processes of this JVM.
 * It keeps the lifecycle honestly (typestate, exclusive attachment, process control) and has no
 * isolation at all: no fence, no mediation (its source never sees a connection), no PTY, no
 * identity. It runs as the test's own user; the context's workload identity is not applied.
 */
final class PlainBackend implements IsolationBackend {
    static final BackendKey KEY = new BackendKey("plain-test", 1);

    /** Environments bound by any instance: the environment is shared, the backend objects are not. */
    private static final Set<String> BOUND = ConcurrentHashMap.newKeySet();
    private static final List<Running> LIVE = new CopyOnWriteArrayList<>();

    private final Set<Defect> defects;

    PlainBackend(Set<Defect> defects) {
        this.defects = Set.copyOf(defects);
    }

    @Override
    public BackendKey key() {
        return KEY;
    }

    @Override
    public BoundBoundary attach(VerifiedTopologyDescriptor descriptor, SandboxContext context) {
        if (!defects.contains(Defect.FOREIGN_DESCRIPTOR) && !descriptor.backend().equals(KEY)) {
            throw new BackendException(Kind.INVALID, "descriptor is for " + descriptor.backend() + ", not " + KEY);
        }
        String environment = new String(descriptor.payload(), StandardCharsets.UTF_8);
        if (!defects.contains(Defect.REATTACH) && !BOUND.add(environment)) {
            throw new BackendException(Kind.DENIED, "environment " + environment + " is already bound");
        }
        return new Bound(environment, context);
    }

    /** @return environments bound now, by any instance */
    static Set<String> bound() {
        return Set.copyOf(BOUND);
    }

    private static void release(String environment) {
        BOUND.remove(environment);
    }

    private final class Bound implements BoundBoundary {
        private final LinearHandle handle = new LinearHandle("plain bound boundary");
        private final String environment;
        private final SandboxContext context;
        private Mediation mediation;

        Bound(String environment, SandboxContext context) {
            this.environment = environment;
            this.context = context;
        }

        @Override
        public synchronized NetworkMediationSource mediation() {
            handle.checkLive();
            if (mediation != null) {
                throw new BackendException(Kind.INVALID, "the mediation source was already taken");
            }
            mediation = new Mediation();
            return mediation;
        }

        @Override
        public synchronized ReadyBoundary confirm() {
            return handle.transition(() -> {
                if (mediation == null && !defects.contains(Defect.CONFIRM_WITHOUT_MEDIATION)) {
                    throw new BackendException(Kind.INVALID, "take the mediation source before confirming");
                }
                // Honest evidence: no control is in force and nothing stops direct egress.
                ConfirmationEvidence evidence = new ConfirmationEvidence(List.of(),
                        System.getProperty("os.version"), context.policy().sha256(), false);
                return new Ready(environment, context, mediation, evidence);
            });
        }

        @Override
        public void abort() {
            handle.transition(() -> {
                release(environment);
                return this;
            });
        }
    }

    private final class Ready implements ReadyBoundary {
        private final LinearHandle handle = new LinearHandle("plain ready boundary");
        private final String environment;
        private final SandboxContext context;
        private final Mediation mediation;
        private final ConfirmationEvidence evidence;

        Ready(String environment, SandboxContext context, Mediation mediation, ConfirmationEvidence evidence) {
            this.environment = environment;
            this.context = context;
            this.mediation = mediation;
            this.evidence = evidence;
        }

        @Override
        public ConfirmationEvidence evidence() {
            handle.checkLive();
            return evidence;
        }

        @Override
        public RunningBoundary startAgent() {
            if (defects.contains(Defect.START_TWICE)) {
                return new Running(environment, context, mediation);
            }
            return handle.transition(() -> new Running(environment, context, mediation));
        }

        @Override
        public void abort() {
            handle.transition(() -> {
                release(environment);
                return this;
            });
        }
    }

    private final class Running implements RunningBoundary {
        private final String environment;
        private final Mediation mediation;
        private final Path workDir;
        private final List<PlainProcess> processes = new CopyOnWriteArrayList<>();
        private final PlainProcess agent;
        private volatile boolean ended;

        Running(String environment, SandboxContext context, Mediation mediation) {
            this.environment = environment;
            this.mediation = mediation;
            try {
                this.workDir = Files.createTempDirectory("plain-boundary-");
            } catch (IOException e) {
                throw new BackendException(Kind.FAILED, "cannot make the boundary's directory", e);
            }
            this.agent = PlainProcess.start(workDir, context.agent().argv(), context.agent().environment(),
                    context.agent().workingDirectory(), defects, false, this::agentEnded);
            processes.add(agent);
            LIVE.add(this);
        }

        private void agentEnded() {
            // Any exit of the agent ends the boundary; the others are killed off this reaper thread.
            if (!ended) {
                ended = true;
                Thread.ofVirtual().name("plain-boundary-end").start(this::release);
            }
        }

        @Override
        public BoundaryProcess agent() {
            return agent;
        }

        @Override
        public BoundaryExec exec() {
            return this::exec;
        }

        private ExecSession exec(ExecSpec spec) {
            if (ended) {
                throw new BackendException(Kind.TERMINATED, "the boundary has ended");
            }
            if (spec.terminal().isPresent()) {
                throw new BackendException(Kind.UNAVAILABLE, "the plain backend has no PTY (that needs native code)");
            }
            PlainProcess process = PlainProcess.start(workDir, spec.argv(), spec.environment(), spec.workingDirectory(),
                    defects, defects.contains(Defect.MERGED_STDERR), () -> { });
            processes.add(process);
            if (ended) {
                process.killTree();
                throw new BackendException(Kind.TERMINATED, "the boundary has ended");
            }
            return new Session(process);
        }

        @Override
        public BoundaryPortForward portForward() {
            return this::forward;
        }

        private ByteChannel forward(LoopbackTarget target) {
            if (ended) {
                throw new BackendException(Kind.TERMINATED, "the boundary has ended");
            }
            try {
                return new SocketChannel(new Socket(target.address(), target.port()),
                        defects.contains(Defect.FORWARD_DROPS_BYTES));
            } catch (IOException e) {
                throw new BackendException(Kind.FAILED, "nothing accepts on " + target + ": " + e.getMessage(), e);
            }
        }

        @Override
        public boolean running() {
            return !ended;
        }

        @Override
        public void terminate() {
            if (defects.contains(Defect.SHARED_TERMINATE)) {
                LIVE.forEach(Running::end);
            } else {
                end();
            }
        }

        private void end() {
            ended = true;
            release();
        }

        private synchronized void release() {
            processes.forEach(PlainProcess::killTree);
            if (mediation != null) {
                mediation.end();
            }
            LIVE.remove(this);
            PlainBackend.release(environment);
            // Status files are read as each process is reaped; remove them only after that.
            processes.forEach(p -> p.awaitExit(Duration.ofSeconds(30)));
            try (var files = Files.walk(workDir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            } catch (IOException ignored) {
                // A leftover temporary directory is harmless.
            }
        }
    }

    /** Pipes of a started exec. */
    private record Session(PlainProcess process) implements ExecSession {
        @Override
        public OutputStream stdin() {
            return process.reaper().getOutputStream();
        }

        @Override
        public InputStream stdout() {
            return process.reaper().getInputStream();
        }

        @Override
        public InputStream stderr() {
            return process.reaper().getErrorStream();
        }

        @Override
        public Optional<Terminal> terminal() {
            return Optional.empty();
        }

        @Override
        public void close() {
            for (AutoCloseable stream : List.<AutoCloseable>of(stdin(), stdout(), stderr())) {
                try {
                    stream.close();
                } catch (Exception ignored) {
                    // Releasing streams of a finished session.
                }
            }
        }
    }

    /** A forwarded loopback connection. */
    private record SocketChannel(Socket socket, boolean dropsBytes) implements ByteChannel {
        @Override
        public InputStream input() {
            try {
                return socket.getInputStream();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public OutputStream output() {
            try {
                OutputStream real = socket.getOutputStream();
                return new OutputStream() {
                    @Override
                    public void write(int b) throws IOException {
                        if (!dropsBytes) {
                            real.write(b);
                        }
                    }

                    @Override
                    public void write(byte[] b, int off, int len) throws IOException {
                        if (!dropsBytes) {
                            real.write(b, off, len);
                        }
                    }

                    @Override
                    public void close() throws IOException {
                        socket.shutdownOutput();
                    }
                };
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // Idempotent release.
            }
        }
    }

    /** A mediation source that never sees anything: the plain backend intercepts nothing. */
    private static final class Mediation implements NetworkMediationSource {
        private final CountDownLatch closed = new CountDownLatch(1);

        @Override
        public Optional<PendingTcpOpen> acceptTcp(Duration timeout) {
            idle(timeout);
            return Optional.empty();
        }

        @Override
        public Optional<PendingDnsQuery> acceptDns(Duration timeout) {
            idle(timeout);
            return Optional.empty();
        }

        private void idle(Duration timeout) {
            try {
                if (closed.getCount() == 0 || closed.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                    throw new BackendException(Kind.TERMINATED, "the mediation source is closed");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new BackendException(Kind.TERMINATED, "interrupted", e);
            }
        }

        void end() {
            closed.countDown();
        }

        @Override
        public void close() {
            closed.countDown();
        }
    }
}
