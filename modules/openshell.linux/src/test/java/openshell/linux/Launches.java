package openshell.linux;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiPredicate;

/** Test-side launches: the real native launcher this build made, a real target, a real listener. */
final class Launches {
    static final Duration WAIT = Duration.ofSeconds(60);
    static final int NOBODY = 65534;

    private Launches() {
    }

    static LauncherProcess.Command command() {
        String launcher = System.getProperty("openshell.launcher");
        if (launcher == null || !java.nio.file.Files.isExecutable(java.nio.file.Path.of(launcher))) {
            throw new IllegalStateException("tests need -Dopenshell.launcher=<the build's native launcher>, not " + launcher);
        }
        return new LauncherProcess.Command(launcher);
    }

    /** A plan for {@code bash -c script} as nobody, with read-only system paths and /proc. */
    static LaunchPlan.Builder bash(String script) {
        return LaunchPlan.builder("/usr/bin/bash")
                .argv(List.of("bash", "-c", script))
                .envp(List.of("PATH=/usr/bin:/bin"))
                .identity(NOBODY, NOBODY, List.of(NOBODY))
                .landlock(LaunchPlan.Mode.REQUIRED, List.of("/usr", "/lib", "/lib64", "/bin", "/proc"), List.of("/dev/null"));
    }

    /** The launch's observable results. */
    record Outcome(LaunchResult ready, LaunchResult started, String output, ChildExit exit) {
    }

    /**
     * Launches and serves the listener: {@code handler} gets each notification and answers it,
     * returning {@code false} to stop serving.
     */
    static Outcome run(LaunchPlan plan, BiPredicate<SeccompListener, SeccompNotification> handler) throws Exception {
        return run(plan, handler, (launcher, p) -> launcher.sendPlan(p, WAIT));
    }

    /** As above, sending the plan with {@code send}. */
    static Outcome run(LaunchPlan plan, BiPredicate<SeccompListener, SeccompNotification> handler,
                       java.util.function.BiFunction<LauncherProcess, LaunchPlan, LaunchResult> send) throws Exception {
        List<OwnedFd> output = OwnedFd.pipe();
        try (OwnedFd devNull = Namespaces.openPath("/dev/null"); OwnedFd read = output.get(0)) {
            LauncherProcess launcher;
            try (OwnedFd write = output.get(1)) {
                launcher = LauncherProcess.start(command(), new LauncherProcess.Stdio(devNull.value(), write.value(), write.value(), false));
            }
            try (launcher) {
                LaunchResult ready = send.apply(launcher, plan);
                if (!(ready instanceof LaunchResult.Ready r)) {
                    String text = new String(read.readToEnd(1 << 20, WAIT), StandardCharsets.UTF_8);
                    return new Outcome(ready, null, text, launcher.process().awaitExit(WAIT).orElseThrow());
                }
                AtomicBoolean stop = new AtomicBoolean();
                CompletableFuture<Void> served = new CompletableFuture<>();
                Thread.ofPlatform().daemon(true).name("test-supervisor").start(() -> {
                    try (SeccompListener listener = r.listener()) {
                        SeccompNotification n = listener.newNotification();
                        while (!stop.get()) {
                            SeccompListener.Pending pending = listener.awaitPending(Duration.ofMillis(200));
                            if (pending == SeccompListener.Pending.NO_USERS) {
                                break;
                            }
                            if (pending == SeccompListener.Pending.NOTIFICATION && listener.receive(n) && !handler.test(listener, n)) {
                                break;
                            }
                        }
                        served.complete(null);
                    } catch (Throwable t) {
                        served.completeExceptionally(t);
                    }
                });
                LaunchResult started = launcher.acknowledge(WAIT);
                String text = new String(read.readToEnd(1 << 20, WAIT), StandardCharsets.UTF_8);
                ChildExit exit = launcher.process().awaitExit(WAIT).orElseThrow();
                stop.set(true);
                served.get(WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
                return new Outcome(ready, started, text, exit);
            }
        }
    }

    /** Answers every notification with CONTINUE. */
    static boolean continueAll(SeccompListener listener, SeccompNotification n) {
        listener.respondContinue(n.id());
        return true;
    }
}
