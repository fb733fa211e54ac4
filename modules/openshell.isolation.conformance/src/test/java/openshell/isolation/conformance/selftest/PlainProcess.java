package openshell.isolation.conformance.selftest;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import openshell.isolation.BackendException;
import openshell.isolation.BoundaryProcess;
import openshell.isolation.ExitStatus;
import openshell.isolation.ProcessSignal;

/**
 * An ordinary child process. Java reports death by signal n as exit code 128+n, so each program
 * runs under a small Perl reaper that records the raw wait status in a file: that is how the
 * plain backend tells {@code exit 143} from death by TERM without native code. The reaper puts
 * the program in its own process group, so terminate() reaches every descendant.
 */
final class PlainProcess implements BoundaryProcess {
    private static final Path PERL = Path.of("/usr/bin/perl");
    private static final Duration REAP = Duration.ofSeconds(30);
    private static final Duration FORK_POLL = Duration.ofMillis(5);
    private static final String REAPER = """
            my $status = shift @ARGV;
            my @forwarded = qw(HUP INT QUIT USR1 USR2 TERM WINCH CONT);
            my $child;
            my @pending;
            for my $s (@forwarded) { $SIG{$s} = sub { if ($child) { kill $s, $child } else { push @pending, $s } }; }
            $child = fork();
            die "fork: $!" unless defined $child;
            if ($child == 0) {
                $SIG{$_} = 'DEFAULT' for @forwarded;
                setpgrp(0, 0);
                exec { $ARGV[0] } @ARGV or do { print STDERR "exec $ARGV[0]: $!\\n"; exit 127 };
            }
            open my $p, '>', "$status.pid.tmp" or die; print $p $child; close $p; rename "$status.pid.tmp", "$status.pid";
            kill $_, $child for @pending;
            my $r;
            do { $r = waitpid($child, 0) } until $r == $child;
            my $st = $?;
            open my $f, '>', "$status.tmp" or die;
            print $f (($st & 127) ? "signal " . ($st & 127) : "exit " . ($st >> 8));
            close $f;
            rename "$status.tmp", $status;
            exit 0;
            """;
    private static final AtomicInteger SEQUENCE = new AtomicInteger();

    private final Process reaper;
    private final Path status;
    private final Set<Defect> defects;
    private final CompletableFuture<ExitStatus> exit = new CompletableFuture<>();
    private final AtomicInteger waits = new AtomicInteger();
    private volatile boolean killed;

    private PlainProcess(Process reaper, Path status, Set<Defect> defects, Runnable beforeExit) {
        this.reaper = reaper;
        this.status = status;
        this.defects = defects;
        reaper.onExit().thenRun(() -> {
            ExitStatus s = recorded();
            beforeExit.run();
            exit.complete(s);
        });
    }

    static PlainProcess start(Path workDir, List<String> argv, Map<String, String> env, String directory,
                              Set<Defect> defects, boolean mergeStderr, Runnable beforeExit) {
        if (!Files.isExecutable(PERL)) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "the plain backend needs " + PERL);
        }
        Path status = workDir.resolve("status-" + SEQUENCE.incrementAndGet());
        ProcessBuilder builder = new ProcessBuilder();
        builder.command().addAll(List.of(PERL.toString(), "-e", REAPER, status.toString()));
        builder.command().addAll(argv);
        builder.environment().clear();
        builder.environment().putAll(env);
        builder.directory(Path.of(directory).toFile());
        builder.redirectErrorStream(mergeStderr);
        try {
            return new PlainProcess(builder.start(), status, defects, beforeExit);
        } catch (IOException e) {
            throw new BackendException(BackendException.Kind.FAILED, "cannot start " + argv.getFirst() + ": " + e.getMessage(), e);
        }
    }

    Process reaper() {
        return reaper;
    }

    private ExitStatus recorded() {
        try {
            String[] word = Files.readString(status, StandardCharsets.US_ASCII).trim().split(" ");
            int n = Integer.parseInt(word[1]);
            if (word[0].equals("signal")) {
                return defects.contains(Defect.SHELL_STATUS) ? new ExitStatus.Exited(128 + n) : new ExitStatus.Signaled(n);
            }
            return new ExitStatus.Exited(n);
        } catch (IOException | RuntimeException e) {
            // No record: the reaper itself was killed, which only terminate() does.
            return killed ? new ExitStatus.Signaled(ProcessSignal.KILL.number()) : new ExitStatus.Exited(reaper.exitValue());
        }
    }

    @Override
    public ExitStatus awaitExit() {
        ExitStatus s = exit.join();
        if (defects.contains(Defect.UNSTABLE_WAIT) && waits.getAndIncrement() > 0) {
            return new ExitStatus.Exited(0);
        }
        return s;
    }

    @Override
    public Optional<ExitStatus> awaitExit(Duration timeout) {
        try {
            return Optional.of(exit.get(Math.max(0, timeout.toMillis()), TimeUnit.MILLISECONDS));
        } catch (TimeoutException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        } catch (ExecutionException e) {
            throw new BackendException(BackendException.Kind.FAILED, "exit status unknown", e.getCause());
        }
    }

    boolean ended() {
        return exit.isDone();
    }

    @Override
    public void signal(ProcessSignal signal) {
        if (ended()) {
            if (defects.contains(Defect.SIGNAL_AFTER_EXIT_IGNORED)) {
                return;
            }
            throw new BackendException(BackendException.Kind.TERMINATED, "the process has ended");
        }
        // Before the program is forked, the reaper holds the signal and forwards it.
        String target = childPid().map(String::valueOf).orElse(String.valueOf(reaper.pid()));
        kill(signal.name(), target);
    }

    @Override
    public void terminate() {
        if (ended()) {
            return;
        }
        if (defects.contains(Defect.SHALLOW_TERMINATE)) {
            forkedChild().ifPresent(pid -> kill("KILL", String.valueOf(pid)));
        } else {
            killTree();
        }
        awaitExit(REAP);
    }

    /** Kills the program's process group, then the reaper if it is still there. */
    void killTree() {
        forkedChild().ifPresent(pid -> kill("KILL", "-" + pid));
        reaper.descendants().forEach(ProcessHandle::destroyForcibly);
        if (!reaper.onExit().completeOnTimeout(reaper, REAP.toMillis(), TimeUnit.MILLISECONDS).join().isAlive()) {
            return;
        }
        killed = true;
        reaper.destroyForcibly();
    }

    /**
     * The program's pid once the reaper has forked it. A terminate() right after start can come
     * before the fork; killing the reaper then would orphan the program, so wait for the fork.
     */
    private Optional<Long> forkedChild() {
        long deadline = System.nanoTime() + REAP.toNanos();
        Optional<Long> pid = childPid();
        while (pid.isEmpty() && reaper.isAlive() && System.nanoTime() < deadline) {
            try {
                Thread.sleep(FORK_POLL);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            pid = childPid();
        }
        return pid;
    }

    private Optional<Long> childPid() {
        try {
            return Optional.of(Long.parseLong(Files.readString(Path.of(status + ".pid")).trim()));
        } catch (IOException | NumberFormatException e) {
            return Optional.empty();
        }
    }

    private static void kill(String signal, String target) {
        try {
            Process kill = new ProcessBuilder(PERL.toString(), "-e", "kill $ARGV[0], $ARGV[1]", signal, target)
                    .redirectErrorStream(true).start();
            if (!kill.waitFor(REAP.toMillis(), TimeUnit.MILLISECONDS)) {
                kill.destroyForcibly();
                throw new BackendException(BackendException.Kind.FAILED, "kill " + signal + " " + target + " hung");
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BackendException(BackendException.Kind.FAILED, "interrupted while signalling", e);
        }
    }
}
