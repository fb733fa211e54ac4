package openshell.driver.docker;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The docker command line, for the tests' own view of the engine (fixtures and inspect asserts
 * that do not go through the driver's code). A missing engine fails the test naming how to start
 * one; nothing is skipped.
 */
final class DockerCli {
    static final long WAIT_SECONDS = 120;

    private DockerCli() {
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
            Path err = Files.createTempFile("docker-cli", ".err");
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
            throw new AssertionError("the docker command cannot be run (apt-get install docker.io): " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Fails the test unless dockerd answers. */
    static void requireEngine() {
        Result r = run("version", "--format", "{{.Server.APIVersion}}");
        if (r.exit() != 0) {
            fail("these tests need a running dockerd on " + System.getenv().getOrDefault("DOCKER_HOST", "unix:///var/run/docker.sock")
                    + " (start it: dockerd --data-root DIR &; .ci/run does): " + r.err());
        }
    }

    /** @return ids of every container (any state) carrying the label */
    static List<String> containersLabelled(String label) {
        String out = run("ps", "-aq", "--no-trunc", "--filter", "label=" + label).orFail("docker ps").out();
        return out.isEmpty() ? List.of() : List.of(out.split("\\s+"));
    }

    /** @return names of every volume carrying the label */
    static List<String> volumesLabelled(String label) {
        String out = run("volume", "ls", "-q", "--filter", "label=" + label).orFail("docker volume ls").out();
        return out.isEmpty() ? List.of() : List.of(out.split("\\s+"));
    }

    static void removeContainers(List<String> ids) {
        for (String id : ids) {
            run("rm", "-f", id);
        }
    }

    static void removeVolumes(List<String> names) {
        for (String v : names) {
            run("volume", "rm", "-f", v);
        }
    }
}
