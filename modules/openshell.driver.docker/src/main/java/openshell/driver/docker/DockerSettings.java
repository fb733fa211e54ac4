package openshell.driver.docker;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import openshell.driver.DialDirection;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * The Docker driver's trusted settings ({@code gateway start --driver-setting KEY=VALUE}), each
 * checked against its bound when the driver is made, so a bad value fails the gateway's start
 * instead of a later create.
 *
 * @param host            {@code docker.host}: the Engine API endpoint ({@code unix://} or {@code tcp://})
 * @param runtimeDir      {@code runtime.dir}: the jlink-built sandbox runtime image on the host, mounted read-only
 * @param supervisorDir   {@code supervisor.dir}: the jlink-built supervisor image on the host, mounted read-only
 * @param supervisorImage {@code supervisor.image}: the base image the supervisor runs on (glibc only)
 * @param namespace       {@code namespace}: the owner of every object, in labels and names
 * @param pidsLimit       {@code limits.pids}: the workload container's pids limit
 * @param memoryBytes     {@code limits.memory}: the workload container's memory limit, bytes
 * @param milliCpus       {@code limits.cpus}: the workload container's CPU limit, thousandths of a CPU
 * @param direction       {@code connection.direction}: who dials, for new sandboxes
 */
record DockerSettings(String host, Optional<Path> runtimeDir, Optional<Path> supervisorDir, String supervisorImage,
                      String namespace, long pidsLimit, long memoryBytes, long milliCpus, DialDirection direction) {
    static final String HOST = "docker.host";
    static final String RUNTIME_DIR = "runtime.dir";
    static final String SUPERVISOR_DIR = "supervisor.dir";
    static final String SUPERVISOR_IMAGE = "supervisor.image";
    static final String NAMESPACE = "namespace";
    static final String PIDS = "limits.pids";
    static final String MEMORY = "limits.memory";
    static final String CPUS = "limits.cpus";
    static final String DIRECTION = "connection.direction";
    /** The process driver's launcher settings, which the gateway fills from its environment: the images' directories follow. */
    static final String RUNTIME_LAUNCHER = "runtime.launcher";
    static final String SUPERVISOR_LAUNCHER = "supervisor.launcher";
    private static final Set<String> KNOWN = Set.of(HOST, RUNTIME_DIR, SUPERVISOR_DIR, SUPERVISOR_IMAGE, NAMESPACE, PIDS,
            MEMORY, CPUS, DIRECTION, RUNTIME_LAUNCHER, SUPERVISOR_LAUNCHER);

    static final String DEFAULT_HOST = "unix:///var/run/docker.sock";
    /** The glibc-only base {@code images/rootfs/glibc-rootfs.sh} makes. */
    static final String DEFAULT_SUPERVISOR_IMAGE = "openshell/glibc:bookworm";
    static final String DEFAULT_NAMESPACE = "default";
    /** Default pids limit of a workload container. */
    static final long DEFAULT_PIDS = 1024;
    /** Fewest pids a workload may be limited to: the runtime's JVM alone needs some 30 threads. */
    static final long MIN_PIDS = 64;
    /** Most pids a workload may be allowed. */
    static final long MAX_PIDS = 65_536;
    /** Default memory limit of a workload container: 2 GiB. */
    static final long DEFAULT_MEMORY = 2L << 30;
    /** Least memory a workload may be limited to: 128 MiB (the runtime's JVM takes some 60). */
    static final long MIN_MEMORY = 128L << 20;
    /** Most memory a workload may be allowed: 64 GiB. */
    static final long MAX_MEMORY = 64L << 30;
    /** Default CPU limit: 2 CPUs. */
    static final long DEFAULT_MILLI_CPUS = 2000;
    /** Least CPU a workload may be limited to: a tenth of one. */
    static final long MIN_MILLI_CPUS = 100;
    /** Most CPU a workload may be allowed: 64. */
    static final long MAX_MILLI_CPUS = 64_000;

    static DockerSettings of(Map<String, String> settings) {
        for (String key : settings.keySet()) {
            if (!KNOWN.contains(key)) {
                throw new DriverException(Kind.INVALID, "the Docker driver has no setting '" + key + "'; settings: "
                        + new java.util.TreeSet<>(KNOWN));
            }
        }
        String host = settings.getOrDefault(HOST, DEFAULT_HOST);
        if (!host.startsWith("unix:///") && !host.startsWith("tcp://")) {
            throw new DriverException(Kind.INVALID, HOST + " must be unix:///PATH or tcp://HOST:PORT: " + host);
        }
        Optional<Path> runtime = image(settings, RUNTIME_DIR, RUNTIME_LAUNCHER);
        Optional<Path> supervisor = image(settings, SUPERVISOR_DIR, SUPERVISOR_LAUNCHER);
        DialDirection direction = switch (settings.getOrDefault(DIRECTION, "runtime")) {
            case "runtime" -> DialDirection.RUNTIME_INITIATED;
            case "supervisor" -> DialDirection.SUPERVISOR_INITIATED;
            default -> throw new DriverException(Kind.INVALID, DIRECTION + " must be runtime or supervisor: "
                    + settings.get(DIRECTION));
        };
        return new DockerSettings(host, runtime, supervisor, settings.getOrDefault(SUPERVISOR_IMAGE, DEFAULT_SUPERVISOR_IMAGE),
                settings.getOrDefault(NAMESPACE, DEFAULT_NAMESPACE),
                bounded(settings, PIDS, DEFAULT_PIDS, MIN_PIDS, MAX_PIDS, 1),
                bounded(settings, MEMORY, DEFAULT_MEMORY, MIN_MEMORY, MAX_MEMORY, 1),
                cpus(settings), direction);
    }

    /** The image directory: the setting, else two levels above the launcher the process driver is given. */
    private static Optional<Path> image(Map<String, String> settings, String key, String launcher) {
        Optional<String> value = Optional.ofNullable(settings.get(key));
        if (value.isPresent()) {
            Path p = Path.of(value.get());
            if (!p.isAbsolute()) {
                throw new DriverException(Kind.INVALID, key + " must be an absolute directory: " + p);
            }
            return Optional.of(p);
        }
        return Optional.ofNullable(settings.get(launcher)).map(Path::of).filter(Path::isAbsolute)
                .map(Path::getParent).map(Path::getParent);
    }

    /**
     * @param what "runtime" or "supervisor", for the message
     * @return the image directory, checked to hold the program
     * @throws DriverException UNAVAILABLE naming the setting
     */
    static Path requireImage(Optional<Path> dir, String key, String what, String program) {
        if (dir.isEmpty() || !Files.isExecutable(dir.get().resolve(program))) {
            throw new DriverException(Kind.UNAVAILABLE, "the Docker driver needs the setting " + key + " naming the jlink-built "
                    + what + " image (a directory with " + program + "; built by ./mvnw -pl jlink/openshell-" + what
                    + " -am package); got " + dir.map(Path::toString).orElse("none"));
        }
        return dir.get();
    }

    private static long bounded(Map<String, String> settings, String key, long dflt, long min, long max, long unit) {
        String v = settings.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.trim()) * unit;
            if (n >= min && n <= max) {
                return n;
            }
        } catch (NumberFormatException | ArithmeticException e) {
            // refused below
        }
        throw new DriverException(Kind.INVALID, key + " must be a whole number from " + min + " to " + max + ": " + v);
    }

    private static long cpus(Map<String, String> settings) {
        String v = settings.get(CPUS);
        if (v == null) {
            return DEFAULT_MILLI_CPUS;
        }
        try {
            long milli = new java.math.BigDecimal(v.trim()).movePointRight(3).longValueExact();
            if (milli >= MIN_MILLI_CPUS && milli <= MAX_MILLI_CPUS) {
                return milli;
            }
        } catch (NumberFormatException | ArithmeticException e) {
            // refused below
        }
        throw new DriverException(Kind.INVALID, CPUS + " must be a number of CPUs from " + MIN_MILLI_CPUS / 1000.0 + " to "
                + MAX_MILLI_CPUS / 1000 + " (at most three decimals): " + v);
    }
}
