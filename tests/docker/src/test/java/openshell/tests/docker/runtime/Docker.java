package openshell.tests.docker.runtime;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The docker CLI against the suite's dockerd: {@code DOCKER_HOST} (what {@code .ci/run} sets for
 * the dockerd it starts), else the {@code openshell.docker.host} property, else the CLI's default
 * socket. The CLI rather than a client library: these tests check the runtime in a container, and
 * a command line is the plainest record of how that container was made.
 */
final class Docker {
    /** Longest any one CLI call may take (an import of a 15 MB tarball takes well under a second). */
    static final Duration CALL_WAIT = Duration.ofSeconds(120);

    private final String host;

    private Docker(String host) {
        this.host = host;
    }

    /** The result of one call. */
    record Result(int exit, String out, String err) {
        Result orFail(String what) {
            if (exit != 0) {
                fail(what + " failed (exit " + exit + "): " + err + out);
            }
            return this;
        }
    }

    /** @return a CLI whose daemon answered, or a failed test saying how to start one */
    static Docker connect() {
        String env = System.getenv("DOCKER_HOST");
        String host = env != null && !env.isBlank() ? env : System.getProperty("openshell.docker.host", "");
        Docker docker = new Docker(host);
        Result version;
        try {
            version = docker.run(List.of("version", "--format", "{{.Server.Version}} {{.Server.APIVersion}}"), Duration.ofSeconds(20));
        } catch (UncheckedIOException e) {
            fail("no docker CLI on this machine (" + e.getMessage() + "): apt-get install -y docker.io");
            throw e;
        }
        if (version.exit() != 0) {
            fail("dockerd is not reachable at " + (host.isEmpty() ? "unix:///var/run/docker.sock" : host) + ": " + version.err().strip()
                    + ". Start one as .ci/run does (apt-get install -y docker.io; dockerd --iptables=false --ip-masq=false"
                    + " --bridge=none --data-root DIR --exec-root DIR --pidfile FILE --host unix://SOCKET &) and set DOCKER_HOST=unix://SOCKET");
        }
        return docker;
    }

    /** @return the daemon's address as given to the CLI ("" for its default) */
    String host() {
        return host;
    }

    /** Runs {@code docker ARGS} and waits at most {@code wait}. */
    Result run(List<String> args, Duration wait) {
        return run(args, wait, null);
    }

    /** Runs {@code docker ARGS} with {@code stdin} on its standard input. */
    Result run(List<String> args, Duration wait, byte[] stdin) {
        Process p = start(args);
        try {
            try (var in = p.getOutputStream()) {
                if (stdin != null) {
                    in.write(stdin);
                }
            }
            Thread.Builder threads = Thread.ofPlatform().daemon(true);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            Thread o = threads.start(() -> copy(p.getInputStream(), out));
            Thread e = threads.start(() -> copy(p.getErrorStream(), err));
            if (!p.waitFor(wait.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                fail("docker " + args + " did not finish within " + wait);
            }
            o.join();
            e.join();
            return new Result(p.exitValue(), out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IllegalStateException(e);
        }
    }

    /** Starts {@code docker ARGS}; the caller owns the process and its streams. */
    Process start(List<String> args) {
        List<String> command = new ArrayList<>(List.of("docker"));
        if (!host.isEmpty()) {
            command.addAll(List.of("--host", host));
        }
        command.addAll(args);
        try {
            return new ProcessBuilder(command).start();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void copy(InputStream in, ByteArrayOutputStream out) {
        try (in) {
            in.transferTo(out);
        } catch (IOException e) {
            // The process ended; what was read is what there is.
        }
    }

    /** Removes a container by name, whatever its state; quiet when there is none. */
    void removeContainer(String name) {
        run(List.of("rm", "--force", "--volumes", name), CALL_WAIT);
    }

    /** Removes an image by reference; quiet when there is none. */
    void removeImage(String reference) {
        run(List.of("rmi", "--force", reference), CALL_WAIT);
    }
}
