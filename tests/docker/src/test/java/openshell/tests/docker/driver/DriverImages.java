package openshell.tests.docker.driver;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The images the driver suites run, imported under tags unique to the run (no registry is
 * reachable): the workload image {@code images/rootfs/test-images.sh} makes (glibc, busybox, the
 * agent account) and the supervisor's glibc-only base from {@code images/rootfs/glibc-rootfs.sh}.
 * {@link #close} removes both.
 */
final class DriverImages implements AutoCloseable {
    final Path work;
    final String workload;
    final String supervisorBase;
    /** A FROM scratch image: one static busybox, no /etc, no /tmp. */
    final String scratch;

    private DriverImages(Path work, String tag) {
        this.work = work;
        this.workload = "openshell-driver-bb/glibc:" + tag;
        this.supervisorBase = "openshell-driver-bb/supervisor-base:" + tag;
        this.scratch = "openshell-driver-bb/scratch:" + tag;
    }

    static DriverImages build(String what) throws IOException, InterruptedException {
        DockerCommand.requireEngine();
        String tag = what + "-" + Long.toHexString(System.nanoTime());
        Path work = Files.createDirectories(Path.of(System.getProperty("openshell.docker.work.dir", "target/docker-work"))
                .resolve("driver-" + tag));
        DriverImages images = new DriverImages(work, tag);
        Path roots = Files.createDirectories(work.resolve("rootfs"));
        DockerCommand.rootfs("test-images.sh", roots, work.resolve("test-images.log"));
        DockerCommand.rootfs("glibc-rootfs.sh", work.resolve("supervisor-base.tar"), work.resolve("glibc-rootfs.log"));
        try {
            DockerCommand.importImage(roots.resolve("glibc.tar"), images.workload);
            DockerCommand.importImage(work.resolve("supervisor-base.tar"), images.supervisorBase);
            DockerCommand.importImage(roots.resolve("scratch.tar"), images.scratch);
        } catch (RuntimeException | Error e) {
            images.close();
            throw e;
        }
        return images;
    }

    /** @return the engine the docker command line uses: {@code DOCKER_HOST} (.ci/run's private dockerd), else the local socket */
    static String dockerHost() {
        String host = System.getenv("DOCKER_HOST");
        return host != null && (host.startsWith("unix:///") || host.startsWith("tcp://")) ? host : "unix:///var/run/docker.sock";
    }

    /** @return a jlink-built image directory ({@code sandbox} or {@code supervisor}) */
    static Path jlink(String name) {
        return Path.of(System.getProperty("openshell.jlink.dir", "../../jlink")).toAbsolutePath().normalize()
                .resolve("openshell-" + name).resolve("target").resolve("openshell-" + name);
    }

    @Override
    public void close() {
        DockerCommand.run("rmi", "-f", workload);
        DockerCommand.run("rmi", "-f", supervisorBase);
        DockerCommand.run("rmi", "-f", scratch);
        // The root file systems and the suites' state: nothing of a run stays behind.
        try (var paths = Files.walk(work)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("cannot remove " + work + ": " + e.getMessage());
        }
    }
}
