package openshell.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import openshell.isolation.BackendException;

/**
 * What this runtime may do to its own namespaces, found from its effective capabilities, never
 * from who started it. The process driver makes the runtime root of fresh user, mount and net
 * namespaces: it holds every capability there, so it bind-mounts the resolver and trust-store
 * views and gives workload processes the policy's user. A container engine runs it as a
 * non-root user with no capabilities at all (Docker's {@code cap_drop ALL}): nothing can be
 * mounted and no identity changed, so the views must already be what the workload needs (the
 * engine's resolver setting) or are refused, and the workload runs as the runtime's own user.
 * Each difference fails closed: a launch or policy that needs what this runtime cannot do is
 * refused with the reason, never run weaker.
 *
 * @param capabilities the effective capability mask ({@code CapEff} of {@code /proc/self/status})
 * @param uid          the runtime's uid
 * @param gid          the runtime's gid
 */
record RuntimePrivilege(long capabilities, int uid, int gid) {
    /** CAP_SYS_ADMIN: mount(2). */
    static final int CAP_SYS_ADMIN = 21;
    /** CAP_SETUID: a workload identity other than the runtime's own. */
    static final int CAP_SETUID = 7;
    /** CAP_SETGID. */
    static final int CAP_SETGID = 6;

    /** @return this process's privilege */
    static RuntimePrivilege current() {
        try {
            long caps = -1;
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("CapEff:")) {
                    caps = Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16);
                }
            }
            if (caps == -1) {
                throw new IOException("no CapEff line in /proc/self/status");
            }
            return new RuntimePrivilege(caps, IdentityCapture.selfUid(), selfGid());
        } catch (IOException | NumberFormatException e) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "cannot read this process's capabilities: " + e);
        }
    }

    private static int selfGid() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("Gid:")) {
                return Integer.parseInt(line.substring(4).trim().split("\\s+")[1]);
            }
        }
        throw new IOException("no Gid line in /proc/self/status");
    }

    private boolean has(int capability) {
        return (capabilities & (1L << capability)) != 0;
    }

    /** @return whether the runtime can bind-mount its views (the process driver's namespaces) */
    boolean canMount() {
        return has(CAP_SYS_ADMIN);
    }

    /** @return whether workload processes can be given another user and group */
    boolean canChangeIdentity() {
        return has(CAP_SETUID) && has(CAP_SETGID);
    }

    /**
     * A runtime without capabilities runs in a root file system that is not its own (a container's
     * image): its own image must then be a read-only mount, so neither the image (files at the
     * mount point) nor the workload (the same uid) can change what the runtime runs.
     *
     * @param javaHome the runtime image
     * @throws BackendException UNAVAILABLE when it is writable
     */
    void requireReadOnlyImage(Path javaHome) {
        if (canMount()) {
            return;
        }
        boolean readOnly;
        try {
            readOnly = Files.getFileStore(javaHome).isReadOnly();
        } catch (IOException e) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "cannot tell whether " + javaHome + " is read-only: " + e);
        }
        if (!readOnly) {
            throw new BackendException(BackendException.Kind.UNAVAILABLE, "the runtime image " + javaHome + " is writable: without"
                    + " capabilities it must be a read-only mount (docker --volume IMAGE:/.openshell/runtime:ro)");
        }
    }

    /** @return a short name for the serving line and errors */
    String describe() {
        return canMount() ? "namespace-root" : "unprivileged (no capabilities: views from the engine, workload as uid " + uid + ")";
    }

    /**
     * Refuses a workload identity this runtime cannot give.
     *
     * @param workloadUid the uid the launch (and the policy's run_as_user) names
     * @param workloadGid its gid
     * @throws BackendException INVALID naming both identities
     */
    void requireIdentity(int workloadUid, int workloadGid) {
        if (!canChangeIdentity() && (workloadUid != uid || workloadGid != gid)) {
            throw new BackendException(BackendException.Kind.INVALID, "the workload must run as " + workloadUid + ":" + workloadGid
                    + " (the launch or the policy's run_as_user), but this runtime runs as " + uid + ":" + gid
                    + " without CAP_SETUID/CAP_SETGID (a container's user): start the container as that user, or name "
                    + uid + ":" + gid + " in the policy");
        }
    }
}
