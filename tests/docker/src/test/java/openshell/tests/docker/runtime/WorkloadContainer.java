package openshell.tests.docker.runtime;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The workload container exactly as the Docker driver makes it (written down for the driver in
 * {@code /tmp/docker-runtime-status.md} too): no network but the engine's {@code lo}, the relay's
 * resolver address, no capabilities, no privilege gain, Docker's default seccomp profile, a
 * non-root user, unprivileged port 53 for the DNS relay, a pids limit, the runtime image mounted
 * read-only at {@value #RUNTIME} and its static launcher as the entry point (the image cannot add
 * arguments), the channel directory at {@value #CHANNEL}.
 */
final class WorkloadContainer {
    /** Where the runtime image is mounted. */
    static final String RUNTIME = "/.openshell/runtime";
    /** Where the channel directory is mounted. */
    static final String CHANNEL = "/.openshell/channel";
    /** The entry point: the static launcher in the runtime image. */
    static final String ENTRYPOINT = RUNTIME + "/bin/openshell-sandbox-static";
    /**
     * The container's user (the policy's workload identity). Not 1000: the supervisor checks the
     * runtime's peer uid by the host's name for it, and CI hosts often name uid 1000.
     */
    static final int UID = 10001;
    /** Processes the container may hold. */
    static final int PIDS_LIMIT = 256;

    private WorkloadContainer() {
    }

    /** @return the jlink-built sandbox image directory */
    static Path runtimeImage() {
        return Path.of(System.getProperty("openshell.jlink.dir", "../../jlink"), "openshell-sandbox", "target", "openshell-sandbox")
                .toAbsolutePath().normalize();
    }

    /**
     * {@code docker run} arguments up to the image (then the image and the runtime's arguments).
     *
     * @param name      the container's unique name
     * @param channel   the host directory mounted as the channel, if any
     * @param workspace mount a tmpfs owned by the user at this path, if given
     */
    static List<String> runArguments(String name, Optional<Path> channel, Optional<String> workspace) {
        List<String> args = new ArrayList<>(List.of("run", "--rm", "--name", name,
                "--network", "none", "--dns", "127.0.0.53", "--dns-search", ".",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--user", UID + ":" + UID, "--sysctl", "net.ipv4.ip_unprivileged_port_start=0",
                "--pids-limit", Integer.toString(PIDS_LIMIT),
                "--volume", runtimeImage() + ":" + RUNTIME + ":ro"));
        channel.ifPresent(c -> args.addAll(List.of("--volume", c + ":" + CHANNEL)));
        workspace.ifPresent(w -> args.addAll(List.of("--tmpfs", w + ":uid=" + UID + ",gid=" + UID + ",mode=0700")));
        args.addAll(List.of("--entrypoint", ENTRYPOINT));
        return args;
    }

    /** @return a container name unique to this run */
    static String uniqueName(String what) {
        return "openshell-test-" + what + "-" + Long.toHexString(System.nanoTime()) + "-" + ProcessHandle.current().pid();
    }
}
