package openshell.driver.docker;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The images these tests run, imported under tags unique to the run from the glibc root file
 * system {@code images/rootfs/glibc-rootfs.sh} makes from Debian packages (no registry is
 * reachable): the supervisor's base, a workload image without USER, and one with USER root.
 * {@link #close} removes them.
 */
final class TestImages implements AutoCloseable {
    private final String tag = Long.toHexString(System.nanoTime()) + "-" + ProcessHandle.current().pid();
    private final List<String> imported = new ArrayList<>();

    static TestImages build(Path work) throws IOException, InterruptedException {
        DockerCli.requireEngine();
        Path script = Path.of(System.getProperty("openshell.images.rootfs.dir", "../../images/rootfs"), "glibc-rootfs.sh");
        Files.createDirectories(work);
        Path tar = work.resolve("glibc.tar");
        Path log = work.resolve("glibc-rootfs.log");
        Process p = new ProcessBuilder("sh", script.toString(), tar.toString()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        if (!p.waitFor(5, TimeUnit.MINUTES) || p.exitValue() != 0) {
            p.destroyForcibly();
            fail(script + " failed (it needs apt-get download): " + Files.readString(log));
        }
        TestImages images = new TestImages();
        try {
            images.importImage(tar, "glibc");
            images.importImage(tar, "root-user", "USER root");
        } catch (RuntimeException | Error e) {
            images.close();
            throw e;
        }
        return images;
    }

    private void importImage(Path tar, String name, String... changes) {
        List<String> args = new ArrayList<>(List.of("import"));
        for (String c : changes) {
            args.addAll(List.of("--change", c));
        }
        args.addAll(List.of(tar.toString(), reference(name)));
        imported.add(reference(name));
        DockerCli.run(args.toArray(String[]::new)).orFail("docker import " + name);
    }

    String reference(String name) {
        return "openshell-driver-test/" + name + ":" + tag;
    }

    @Override
    public void close() {
        imported.forEach(i -> DockerCli.run("rmi", "-f", i));
    }
}
