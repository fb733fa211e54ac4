package openshell.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import openshell.isolation.BackendException;
import openshell.linux.Cgroup;
import openshell.linux.LaunchPlan;
import openshell.linux.LauncherProcess;

/**
 * How the runtime's main starts workload processes: the image's native launcher, the user, group
 * and Landlock lists and mode the policy's static sections decided ({@link StaticConfinement};
 * without a filesystem section the host's tool directories read-only and only the workspace
 * writable), and a cgroup v2
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
    /** Where the runtime image keeps the native workload launcher, under {@code java.home}. */
    static final String IMAGE_LAUNCHER = "lib/openshell-launcher";
    /** Names another launcher: a runtime run from a build's class path (tests) rather than the image. */
    static final String LAUNCHER_PROPERTY = "openshell.launcher";

    private WorkloadLaunch() {
    }

    /**
     * @return the native launcher: {@value #LAUNCHER_PROPERTY} if set, else the image's {@value #IMAGE_LAUNCHER}
     * @throws BackendException UNAVAILABLE if it is not an executable file
     */
    static LauncherProcess.Command command() {
        return command(java.util.Optional.ofNullable(System.getProperty(LAUNCHER_PROPERTY)), Path.of(System.getProperty("java.home")));
    }

    /** As above, for a given property value and {@code java.home}. */
    static LauncherProcess.Command command(java.util.Optional<String> named, Path javaHome) {
        Path launcher = named.map(Path::of).orElse(javaHome.resolve(IMAGE_LAUNCHER));
        if (!launcher.isAbsolute() || !Files.isRegularFile(launcher) || !Files.isExecutable(launcher)) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "no workload launcher at " + launcher
                    + " (the runtime image has it as " + IMAGE_LAUNCHER + "; elsewhere set -D" + LAUNCHER_PROPERTY + ")");
        }
        return new LauncherProcess.Command(launcher.toString());
    }

    /**
     * The plan of every workload process: the same identity, Landlock mode and lists for the
     * agent and every exec, fixed before the first one starts.
     *
     * @param confinement what the policy's static sections resolved to
     * @return the template
     */
    static ProcessTree.PlanTemplate template(StaticConfinement confinement) {
        return new ProcessTree.PlanTemplate() {
            @Override
            public LaunchPlan apply(ProcessTree.LaunchRequest request) {
                return LaunchPlan.builder(executable(request.argv().getFirst()))
                        .argv(request.argv())
                        .envp(request.environment())
                        .workingDirectory(request.directory())
                        .identity(confinement.uid(), confinement.gid(), List.of(confinement.gid()))
                        .landlock(confinement.mode(), confinement.readOnly(), confinement.readWrite())
                        .controllingTerminal(request.terminal().isPresent())
                        .build();
            }

            @Override
            public String describe() {
                return confinement.describe();
            }
        };
    }

    /**
     * Resolves the bundle's static sections in this runtime's namespaces, says what they became
     * (loudly when Landlock is not complete), and gives a launch-made workspace to the policy's user.
     *
     * @param confinement what the bundle carries
     * @param defaultUid  the launch's workload uid
     * @param defaultGid  the launch's workload gid
     * @param workspace   the workspace
     * @param abi         the kernel's Landlock ABI
     * @return the template
     * @throws BackendException INVALID naming the policy field that cannot be honoured
     */
    static ProcessTree.PlanTemplate template(openshell.protocol.WorkloadConfinement confinement, int defaultUid,
                                             int defaultGid, Path workspace, int abi) throws IOException {
        return template(confinement, defaultUid, defaultGid, workspace, abi, RuntimePrivilege.current());
    }

    /**
     * As above, refusing an identity the runtime cannot give ({@link RuntimePrivilege#requireIdentity}):
     * a runtime without CAP_SETUID runs every workload process as itself, so a policy or launch
     * naming another user is refused before anything runs, never ignored.
     */
    static ProcessTree.PlanTemplate template(openshell.protocol.WorkloadConfinement confinement, int defaultUid,
                                             int defaultGid, Path workspace, int abi, RuntimePrivilege privilege)
            throws IOException {
        return template(confinement, defaultUid, defaultGid, workspace, abi, privilege, List.of());
    }

    /** As above, with files every workload process may also read (a container's trust bundle). */
    static ProcessTree.PlanTemplate template(openshell.protocol.WorkloadConfinement confinement, int defaultUid,
                                             int defaultGid, Path workspace, int abi, RuntimePrivilege privilege,
                                             List<Path> extraReadOnly) throws IOException {
        StaticConfinement c = StaticConfinement.resolve(confinement, defaultUid, defaultGid, workspace, abi, Path.of("/"),
                Files.readString(Path.of("/proc/self/uid_map")), Files.readString(Path.of("/proc/self/gid_map")));
        privilege.requireIdentity(c.uid(), c.gid());
        if (!extraReadOnly.isEmpty()) {
            List<String> readOnly = new java.util.ArrayList<>(c.readOnly());
            extraReadOnly.forEach(p -> readOnly.add(p.toString()));
            c = new StaticConfinement(c.uid(), c.gid(), c.mode(), readOnly, c.readWrite(), c.skipped(), c.landlock());
        }
        return finish(c, workspace, defaultUid);
    }

    private static ProcessTree.PlanTemplate finish(StaticConfinement c, Path workspace, int defaultUid)
            throws IOException {
        c.adoptWorkspace(workspace, defaultUid);
        System.err.println("openshell-sandbox: " + (c.complete() ? "" : "WARNING: ") + "workload confinement: " + c.describe());
        return template(c);
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
