package openshell.isolation.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import openshell.isolation.AgentSpec;
import openshell.isolation.BackendException;
import openshell.isolation.BoundBoundary;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ConfirmationEvidence;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.IsolationBackend;
import openshell.isolation.NetworkMediationSource;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.ReadyBoundary;
import openshell.isolation.RunningBoundary;
import openshell.isolation.TcpDestination;
import openshell.isolation.VerifiedTopologyDescriptor;

import org.junit.jupiter.api.function.Executable;

/**
 * What one check works with: the target, and every boundary, source and session it opened, so
 * all of them are released however the check ends.
 */
final class Workbench implements AutoCloseable {
    private final ConformanceTarget target;
    private final Deque<Runnable> cleanup = new ArrayDeque<>();

    Workbench(ConformanceTarget target) {
        this.target = target;
    }

    ConformanceTarget target() {
        return target;
    }

    /** A boundary taken all the way to running, with what each step returned. */
    record Started(Launch launch, NetworkMediationSource source, ConfirmationEvidence evidence,
                   RunningBoundary running) {
    }

    AgentSpec script(String script) {
        return AgentSpec.of(List.of(target.shell(), "-c", script));
    }

    AgentSpec idleAgent() {
        return script("exec sleep " + IsolationConformance.WAIT.multipliedBy(10).toSeconds());
    }

    Launch launch(AgentSpec agent) {
        Launch launch = target.freshLaunch(agent);
        onClose(() -> target.discard(launch));
        assertEquals(agent, launch.context().agent(), "freshLaunch must carry the agent unchanged");
        assertEquals(target.backend(), launch.descriptor().backend(), "freshLaunch must write a descriptor for the backend under test");
        return launch;
    }

    VerifiedTopologyDescriptor verify(Launch launch) {
        return target.registry().verify(launch.descriptor(), target.backend());
    }

    IsolationBackend backend(VerifiedTopologyDescriptor verified) {
        return target.registry().backend(verified);
    }

    BoundBoundary attach(Launch launch) {
        VerifiedTopologyDescriptor verified = verify(launch);
        BoundBoundary bound = backend(verified).attach(verified, launch.context());
        onClose(() -> quietly(bound::abort));
        return bound;
    }

    NetworkMediationSource mediation(BoundBoundary bound) {
        NetworkMediationSource source = bound.mediation();
        onClose(source::close);
        return source;
    }

    /** Confirms; the ready handle is aborted at the end unless something consumed it first. */
    ReadyBoundary confirm(BoundBoundary bound) {
        return adopt(bound.confirm());
    }

    RunningBoundary start(ReadyBoundary ready) {
        RunningBoundary running = ready.startAgent();
        onClose(running::terminate);
        return running;
    }

    Started start(AgentSpec agent) {
        Launch launch = launch(agent);
        BoundBoundary bound = attach(launch);
        NetworkMediationSource source = mediation(bound);
        ReadyBoundary ready = confirm(bound);
        ConfirmationEvidence evidence = ready.evidence();
        return new Started(launch, source, evidence, start(ready));
    }

    Started startIdle() {
        return start(idleAgent());
    }

    ExecSession exec(RunningBoundary running, ExecSpec spec) {
        ExecSession session = running.exec().exec(spec);
        onClose(() -> {
            quietly(session.process()::terminate);
            quietly(session::close);
        });
        return session;
    }

    ExecSession exec(RunningBoundary running, List<String> argv) {
        return exec(running, ExecSpec.builder(argv).build());
    }

    ExecSession sh(RunningBoundary running, String script) {
        return exec(running, List.of(target.shell(), "-c", script));
    }

    /**
     * Takes charge of whatever a call that should have been refused returned, so a backend that
     * wrongly says yes is still cleaned up after; the check then fails on the missing refusal.
     */
    <T> T adopt(T result) {
        switch (result) {
            case BoundBoundary bound -> onClose(() -> quietly(bound::abort));
            case ReadyBoundary ready -> onClose(() -> quietly(ready::abort));
            case RunningBoundary running -> onClose(running::terminate);
            case NetworkMediationSource source -> onClose(source::close);
            case ExecSession session -> onClose(() -> {
                quietly(session.process()::terminate);
                quietly(session::close);
            });
            case AutoCloseable closeable -> onClose(() -> {
                try {
                    closeable.close();
                } catch (Exception ignored) {
                    // Releasing what should never have been opened.
                }
            });
            case null, default -> {
            }
        }
        return result;
    }

    void onClose(Runnable action) {
        cleanup.push(action);
    }

    @Override
    public void close() {
        while (!cleanup.isEmpty()) {
            quietly(cleanup.pop());
        }
    }

    static void quietly(Runnable action) {
        try {
            action.run();
        } catch (RuntimeException ignored) {
            // Cleanup after a check: the check's own outcome is what matters.
        }
    }

    static BackendException expect(BackendException.Kind kind, Executable call, String what) {
        BackendException e = assertThrows(BackendException.class, call, what + " must be refused with " + kind);
        assertEquals(kind, e.kind(), what + ": wrong kind (" + e.getMessage() + ")");
        return e;
    }

    static ExitStatus await(BoundaryProcess process, String what) {
        return process.awaitExit(IsolationConformance.WAIT)
                .orElseGet(() -> fail(what + " did not end within " + IsolationConformance.WAIT));
    }

    /**
     * Waits for an exec whose output the check does not need, consuming that output meanwhile: a
     * backend may hold the exit status until the output is delivered.
     */
    static ExitStatus finish(ExecSession session, String what) {
        for (InputStream stream : List.of(session.stdout(), session.stderr())) {
            Thread.ofVirtual().name("conformance-drain").start(() -> {
                try {
                    stream.transferTo(OutputStream.nullOutputStream());
                } catch (IOException ignored) {
                    // The stream was closed by the cleanup; nothing was waiting for it.
                }
            });
        }
        return await(session.process(), what);
    }

    /** Runs a blocking read off the check's thread, so a stuck stream fails the check instead of hanging it. */
    static <T> T within(Duration bound, String what, ThrowingSupplier<T> read) {
        CompletableFuture<T> future = new CompletableFuture<>();
        Thread reader = Thread.ofVirtual().name("conformance-read").start(() -> {
            try {
                future.complete(read.get());
            } catch (Throwable t) {
                future.completeExceptionally(t);
            }
        });
        try {
            return future.get(bound.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            reader.interrupt();
            return fail(what + " did not happen within " + bound);
        } catch (ExecutionException e) {
            return fail(what + " failed: " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return fail("interrupted while waiting for " + what);
        }
    }

    /** A read that may throw. */
    @FunctionalInterface
    interface ThrowingSupplier<T> {
        T get() throws Exception;
    }

    /** Reads a stream to its end, at most {@link IsolationConformance#MAX_PROBE_OUTPUT} bytes. */
    static String readAll(InputStream in, String what) {
        return within(IsolationConformance.WAIT, "end of " + what, () -> drain(in, what));
    }

    static String drain(InputStream in, String what) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[8192];
        int n;
        while ((n = in.read(buffer)) >= 0) {
            out.write(buffer, 0, n);
            if (out.size() > IsolationConformance.MAX_PROBE_OUTPUT) {
                throw new IOException(what + " exceeds " + IsolationConformance.MAX_PROBE_OUTPUT + " bytes");
            }
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    /** Reads one line (without its terminator); a terminal's CR is dropped. */
    static String readLine(InputStream in, String what) {
        return within(IsolationConformance.WAIT, "a line on " + what, () -> {
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            int b;
            while ((b = in.read()) >= 0 && b != '\n') {
                if (b != '\r') {
                    line.write(b);
                }
                if (line.size() > IsolationConformance.MAX_PROBE_OUTPUT) {
                    throw new IOException(what + ": line exceeds " + IsolationConformance.MAX_PROBE_OUTPUT + " bytes");
                }
            }
            if (b < 0 && line.size() == 0) {
                throw new IOException(what + " ended before a line arrived");
            }
            return line.toString(StandardCharsets.UTF_8);
        });
    }

    /**
     * Waits for the next pending TCP open, giving up early if the probe process already ended:
     * an open that was never held never reaches mediation.
     */
    static Optional<PendingTcpOpen> nextOpen(NetworkMediationSource source, BoundaryProcess probe, Duration bound) {
        long deadline = System.nanoTime() + bound.toNanos();
        while (System.nanoTime() < deadline) {
            Optional<PendingTcpOpen> open = source.acceptTcp(IsolationConformance.POLL);
            if (open.isPresent()) {
                return open;
            }
            if (probe != null && probe.awaitExit(Duration.ZERO).isPresent()) {
                return source.acceptTcp(IsolationConformance.POLL);
            }
        }
        return Optional.empty();
    }

    /** The open a probe made, or a failure that says it was never held for a decision. */
    static PendingTcpOpen heldOpen(NetworkMediationSource source, ExecSession probe, TcpDestination destination,
                                   HostListener listener) {
        Optional<PendingTcpOpen> open = nextOpen(source, probe.process(), IsolationConformance.WAIT);
        if (open.isEmpty()) {
            String outcome = probe.process().awaitExit(Duration.ZERO)
                    .map(s -> "the probe ended with " + s).orElse("the probe still runs");
            String leak = listener != null && listener.accepted() > 0
                    ? "; the destination was reached directly, around mediation" : "";
            fail("no pending TCP open for " + destination + " reached the mediation source within "
                    + IsolationConformance.WAIT + " (" + outcome + leak + ")");
        }
        return open.orElseThrow();
    }

    /** A probe the target must supply; its absence fails the check and says so. */
    static <T> T required(Optional<T> probe, String name, String invariant) {
        return probe.orElseGet(() -> fail("the backend supplies no " + name + ", so " + invariant
                + " cannot be shown; a check without its probe fails, it is never skipped"));
    }
}
