package openshell.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import openshell.isolation.BackendException;
import openshell.linux.Cgroup;
import openshell.linux.LaunchPlan;
import openshell.linux.LauncherProcess;

/**
 * How the runtime's main starts workload processes: the launcher command of this very JVM (same
 * java, module path and JNA directory), the workload's uid/gid from the launch bundle, Landlock
 * with the host's tool directories read-only and only the workspace writable, and a cgroup v2
 * leaf under the runtime's own cgroup (the process driver delegates that cgroup to the
 * sandbox's mapped root, so the leaf can be created and killed from inside the user namespace).
 */
final class WorkloadLaunch {
    /** Host directories workload processes may read and execute from (those that exist). */
    static final List<String> READ_ONLY = List.of("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc",
            "/opt", "/proc", "/dev", "/sys/devices/system/cpu");
    /** Device files workload processes may write besides the workspace. */
    static final List<String> WRITABLE_DEVICES = List.of("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx",
            "/dev/pts");
    /** Where argv[0] is looked up when it is not absolute. */
    static final List<String> SEARCH_PATH = List.of("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin");
    /**
     * The workload launcher JVM's options. Each workload process (and the spare the runtime keeps
     * ready) is such a JVM, so its resident memory counts once per process. It loads a few hundred
     * classes, makes a handful of native calls and execs: the interpreter alone ({@code -Xint})
     * starts it with less CPU than C1 and without compiler threads or code, and its heap holds one
     * plan (at most {@code LaunchPlan.MAX_PLAN_BYTES}). Measured in the sandbox image (tests/perf/README.md):
     * 60.7 -> 41.7 MiB resident and 640-840 -> 340-440 ms of CPU to ready, with
     * {@link #LAUNCHER_MODULES} as its module path.
     */
    static final List<String> LAUNCHER_JVM_OPTIONS = List.of("-Xint", "-XX:+UseSerialGC", "-Xms4m", "-Xmx32m",
            "-XX:-UsePerfData");
    /**
     * The launcher's module path: only these modules' locations. With the runtime's whole module
     * path, JNA (an automatic module in the image) drew every automatic module of it (guava, grpc,
     * protobuf...) into the launcher's module graph: 6 MiB resident more.
     */
    static final List<String> LAUNCHER_MODULES = List.of("openshell.linux", "com.sun.jna");

    private WorkloadLaunch() {
    }

    /** @return the launcher command of this JVM */
    static LauncherProcess.Command command() {
        String jna = System.getProperty("jna.boot.library.path");
        if (jna == null) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE,
                    "the runtime must run with -Djna.boot.library.path set (its launcher needs it)");
        }
        return new LauncherProcess.Command(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                launcherModulePath(), jna, LAUNCHER_JVM_OPTIONS);
    }

    /**
     * @return where this JVM found {@link #LAUNCHER_MODULES}, as the launcher's module path
     * @throws BackendException UNAVAILABLE if one is not a named module of the boot layer with a location
     */
    static List<String> launcherModulePath() {
        List<String> path = new ArrayList<>();
        for (String name : LAUNCHER_MODULES) {
            Path location = ModuleLayer.boot().configuration().findModule(name)
                    .flatMap(module -> module.reference().location())
                    .filter(uri -> "file".equals(uri.getScheme()))
                    .map(Path::of)
                    .orElseThrow(() -> new BackendException(BackendException.Kind.UNAVAILABLE,
                            "the runtime must run on the module path: no file location for module " + name
                                    + " (the workload launcher needs it)"));
            path.add(location.toString());
        }
        return List.copyOf(path);
    }

    /**
     * The plan of every workload process.
     *
     * @param uid       workload uid
     * @param gid       workload gid
     * @param workspace the writable workspace
     * @return the template
     */
    static ProcessTree.PlanTemplate template(int uid, int gid, Path workspace) {
        List<String> readOnly = READ_ONLY.stream().filter(p -> Files.exists(Path.of(p))).toList();
        List<String> readWrite = new ArrayList<>(WRITABLE_DEVICES.stream().filter(p -> Files.exists(Path.of(p))).toList());
        readWrite.add(workspace.toString());
        return request -> LaunchPlan.builder(executable(request.argv().getFirst()))
                .argv(request.argv())
                .envp(request.environment())
                .workingDirectory(request.directory())
                .identity(uid, gid, List.of(gid))
                .landlock(LaunchPlan.Mode.REQUIRED, readOnly, List.copyOf(readWrite))
                .controllingTerminal(request.terminal().isPresent())
                .build();
    }

    private static String executable(String argv0) {
        if (argv0.startsWith("/")) {
            return argv0;
        }
        if (argv0.contains("/")) {
            throw new BackendException(BackendException.Kind.INVALID, "argv[0] must be absolute or a bare name: " + argv0);
        }
        return SEARCH_PATH.stream().map(d -> Path.of(d, argv0)).filter(Files::isExecutable).findFirst()
                .map(Path::toString)
                .orElseThrow(() -> new BackendException(BackendException.Kind.INVALID, argv0 + " not found in " + SEARCH_PATH));
    }

    /**
     * The workload's cgroup leaf, under this process's own cgroup v2 directory.
     *
     * @param name leaf name
     * @return the leaf
     */
    static Cgroup leaf(String name) {
        Path root = Cgroup.v2Root().orElseThrow(() -> new BackendException(BackendException.Kind.UNAVAILABLE,
                "cgroup v2 is not mounted: the runtime cannot guarantee to kill a whole process tree"));
        String own;
        try {
            own = Files.readAllLines(Path.of("/proc/self/cgroup")).stream().filter(l -> l.startsWith("0::"))
                    .map(l -> l.substring(3)).findFirst()
                    .orElseThrow(() -> new BackendException(BackendException.Kind.UNAVAILABLE,
                            "/proc/self/cgroup names no cgroup v2 directory"));
        } catch (IOException e) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "cannot read /proc/self/cgroup: " + e.getMessage());
        }
        Path parent = own.equals("/") ? root : root.resolve(own.substring(1));
        try {
            return Cgroup.create(parent, name);
        } catch (RuntimeException e) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "cannot create the workload cgroup under " + parent
                    + " (the process driver must delegate the runtime's cgroup to the sandbox): " + e.getMessage());
        }
    }

    /**
     * A fresh private workspace for the workload, owned by it.
     *
     * @param uid workload uid
     * @param gid workload gid
     * @return the directory
     */
    static Path freshWorkspace(int uid, int gid) throws IOException {
        Path dir = Files.createTempDirectory("openshell-workspace");
        Files.setAttribute(dir, "unix:uid", uid);
        Files.setAttribute(dir, "unix:gid", gid);
        return dir;
    }
}
