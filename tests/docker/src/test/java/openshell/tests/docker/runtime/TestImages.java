package openshell.tests.docker.runtime;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The suite's workload images, made by {@code images/rootfs/test-images.sh} from Debian packages
 * and {@code docker import}ed under a tag unique to this run (no registry is reachable, and two
 * runs never share an image); {@link #close} removes every one of them.
 */
final class TestImages implements AutoCloseable {
    /** Longest the rootfs script may take (apt-get download of five packages, gcc for evil.so). */
    static final Duration BUILD_WAIT = Duration.ofMinutes(5);
    /** What the hostile image's ENV sets: each would change the runtime's loader or JVM if it got there. */
    static final List<String> HOSTILE_ENV = List.of("LD_PRELOAD=/lib/evil.so", "LD_LIBRARY_PATH=/lib",
            "JAVA_TOOL_OPTIONS=-XX:+PrintFlagsFinal", "_JAVA_OPTIONS=-XX:+PrintFlagsFinal",
            "JDK_JAVA_OPTIONS=-XX:+PrintFlagsFinal", "GLIBC_TUNABLES=glibc.malloc.check=3",
            "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9");

    private final Docker docker;
    private final String tag;
    private final List<String> imported = new ArrayList<>();

    private TestImages(Docker docker, String tag) {
        this.docker = docker;
        this.tag = tag;
    }

    /** Builds the four root file systems under {@code work} and imports them. */
    static TestImages build(Docker docker, Path work) throws IOException, InterruptedException {
        Path script = Path.of(System.getProperty("openshell.images.rootfs.dir", "../../images/rootfs"), "test-images.sh");
        Path roots = Files.createDirectories(work.resolve("rootfs"));
        Process p = new ProcessBuilder("sh", script.toString(), roots.toString()).redirectErrorStream(true)
                .redirectOutput(work.resolve("rootfs.log").toFile()).start();
        if (!p.waitFor(BUILD_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
            p.destroyForcibly();
            fail(script + " did not finish within " + BUILD_WAIT);
        }
        if (p.exitValue() != 0) {
            fail(script + " failed (needs apt-get download and gcc): " + Files.readString(work.resolve("rootfs.log")));
        }
        TestImages images = new TestImages(docker, Long.toHexString(System.nanoTime()) + "-" + ProcessHandle.current().pid());
        try {
            for (String name : List.of("glibc", "musl", "scratch")) {
                images.importImage(roots.resolve(name + ".tar"), name, List.of());
            }
            images.importImage(roots.resolve("hostile.tar"), "hostile", HOSTILE_ENV);
        } catch (RuntimeException | Error e) {
            images.close();
            throw e;
        }
        return images;
    }

    private void importImage(Path tar, String name, List<String> env) {
        String reference = reference(name);
        List<String> args = new ArrayList<>(List.of("import"));
        for (String e : env) {
            args.addAll(List.of("--change", "ENV " + e));
        }
        args.addAll(List.of(tar.toString(), reference));
        imported.add(reference);
        docker.run(args, Docker.CALL_WAIT).orFail("docker import " + name);
    }

    /** @return this run's reference of the named image (glibc, musl, scratch, hostile) */
    String reference(String name) {
        return "openshell-test/" + name + ":" + tag;
    }

    @Override
    public void close() {
        imported.forEach(docker::removeImage);
    }
}
