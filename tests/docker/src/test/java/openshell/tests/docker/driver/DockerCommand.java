package openshell.tests.docker.driver;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The docker command line: the tests' own view of what the driver made, independent of the
 * driver's engine client. No dockerd fails the test saying how to start one.
 */
final class DockerCommand {
    static final long WAIT_SECONDS = 120;

    private DockerCommand() {
    }

    record Result(int exit, String out, String err) {
        Result orFail(String what) {
            if (exit != 0) {
                fail(what + " failed (" + exit + "): " + err + out);
            }
            return this;
        }
    }

    static Result run(String... args) {
        List<String> command = new ArrayList<>(List.of("docker"));
        command.addAll(List.of(args));
        try {
            Path err = Files.createTempFile("docker", ".err");
            try {
                Process p = new ProcessBuilder(command).redirectError(err.toFile()).start();
                p.getOutputStream().close();
                byte[] out = p.getInputStream().readAllBytes();
                if (!p.waitFor(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    fail(command + " did not finish within " + WAIT_SECONDS + " s");
                }
                return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8).strip(), Files.readString(err).strip());
            } finally {
                Files.deleteIfExists(err);
            }
        } catch (IOException e) {
            throw new AssertionError("the docker command cannot run (apt-get install docker.io): " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    static void requireEngine() {
        Result r = run("version", "--format", "{{.Server.APIVersion}}");
        if (r.exit() != 0) {
            fail("the Docker driver tests need a running dockerd (start it: dockerd --data-root DIR &; .ci/run does): " + r.err());
        }
    }

    /** @return one inspect field of a container (a Go template) */
    static String inspect(String container, String template) {
        return run("inspect", "--type", "container", "--format", template, container).orFail("docker inspect " + container).out();
    }

    static boolean running(String container) {
        Result r = run("inspect", "--type", "container", "--format", "{{.State.Running}}", container);
        return r.exit() == 0 && r.out().equals("true");
    }

    static boolean exists(String container) {
        return run("inspect", "--type", "container", container).exit() == 0;
    }

    static List<String> containersLabelled(String label) {
        String out = run("ps", "-aq", "--no-trunc", "--filter", "label=" + label).orFail("docker ps").out();
        return out.isEmpty() ? List.of() : List.of(out.split("\\s+"));
    }

    static List<String> volumesLabelled(String label) {
        String out = run("volume", "ls", "-q", "--filter", "label=" + label).orFail("docker volume ls").out();
        return out.isEmpty() ? List.of() : List.of(out.split("\\s+"));
    }

    /** Imports a root file system tarball (no registry is reachable). */
    static void importImage(Path tar, String reference, String... changes) {
        List<String> args = new ArrayList<>(List.of("import"));
        for (String c : changes) {
            args.addAll(List.of("--change", c));
        }
        args.addAll(List.of(tar.toString(), reference));
        run(args.toArray(String[]::new)).orFail("docker import " + reference);
    }

    /** Runs a script of images/rootfs with one output argument, failing the test if it fails. */
    static void rootfs(String script, Path out, Path log) throws IOException, InterruptedException {
        Path path = Path.of(System.getProperty("openshell.images.rootfs.dir", "../../images/rootfs"), script);
        Process p = new ProcessBuilder("sh", path.toString(), out.toString()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        if (!p.waitFor(5, TimeUnit.MINUTES) || p.exitValue() != 0) {
            p.destroyForcibly();
            fail(path + " failed (it needs apt-get download): " + Files.readString(log));
        }
    }
}
