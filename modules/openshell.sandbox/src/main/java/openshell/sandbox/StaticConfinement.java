package openshell.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import openshell.isolation.BackendException;
import openshell.linux.LandlockOutcome;
import openshell.linux.LaunchPlan;
import openshell.linux.LauncherProcess;
import openshell.linux.LinuxException;
import openshell.protocol.WorkloadConfinement;

/**
 * The policy's static sections turned into what every workload process gets, once, before the
 * first one starts: the user and group (a name resolved in the workload's own passwd and group
 * files), the Landlock path lists and whether Landlock is a hard requirement. Anything that cannot
 * be honoured exactly refuses the launch with the policy field that asked for it: the workload
 * never runs as another uid, and never without Landlock unless the policy said best_effort.
 *
 * @param uid       the workload uid
 * @param gid       the workload gid
 * @param mode      Landlock required or best effort
 * @param readOnly  paths read-only beneath (each exists)
 * @param readWrite paths with every right beneath (each exists)
 * @param skipped   listed paths that do not exist, so nothing is granted there
 * @param landlock  what the launcher will enforce on this kernel
 */
record StaticConfinement(int uid, int gid, LaunchPlan.Mode mode, List<String> readOnly, List<String> readWrite,
                         List<String> skipped, LandlockOutcome landlock) {
    /**
     * What every workload process may read whatever the policy lists: pseudo-files without
     * anything persistent (a process without {@code /proc} or {@code /dev} cannot even start most tools).
     */
    static final List<String> BASELINE_READ_ONLY = List.of("/proc", "/dev", "/sys/devices/system/cpu");
    /** Device files every workload process may write: none stores anything. */
    static final List<String> BASELINE_WRITABLE = WorkloadLaunch.WRITABLE_DEVICES;
    /** Longest passwd or group file read (bytes): an image's account database is small. */
    static final long MAX_ACCOUNT_FILE_BYTES = 4L << 20;
    /** Longest {@link #describe()} (characters): 256 long paths would not fit one evidence line. */
    static final int MAX_DESCRIPTION_CHARS = 4096;

    StaticConfinement {
        readOnly = List.copyOf(readOnly);
        readWrite = List.copyOf(readWrite);
        skipped = List.copyOf(skipped);
    }

    /** @return whether every Landlock right the sandbox targets is enforced */
    boolean complete() {
        return landlock.complete();
    }

    /** One line for the runtime's status and the confirmation evidence; loud when Landlock is not complete. */
    String describe() {
        String fs = complete() ? "Landlock ABI " + landlock.abi() + " enforced"
                : "LANDLOCK NOT FULLY ENFORCED (landlock.compatibility best_effort): kernel Landlock ABI " + landlock.abi()
                        + (landlock.enforced() ? ", file-system rights 0x" + Long.toHexString(landlock.handledFs()) + " of 0x"
                                + Long.toHexString(landlock.requestedFs()) : ", no Landlock ruleset at all: filesystem_policy is not enforced");
        String all = fs + "; uid " + uid + " gid " + gid + "; read-only " + readOnly + "; read-write " + readWrite
                + (skipped.isEmpty() ? "" : "; not present, nothing granted: " + skipped);
        return all.length() <= MAX_DESCRIPTION_CHARS ? all : all.substring(0, MAX_DESCRIPTION_CHARS - 3) + "...";
    }

    /**
     * Resolves the confinement for this runtime.
     *
     * @param c          what the bundle carries
     * @param defaultUid the launch's workload uid (when the policy names no user)
     * @param defaultGid the launch's workload gid (when the policy names no group)
     * @param workspace  the sandbox's workspace (writable without a filesystem section, or with include_workdir)
     * @param abi        the kernel's Landlock ABI
     * @param root       the workload's root directory (its {@code etc/passwd}, {@code etc/group})
     * @param uidMap     this user namespace's {@code uid_map}
     * @param gidMap     this user namespace's {@code gid_map}
     * @return the confinement
     * @throws BackendException INVALID naming the policy field that cannot be honoured
     */
    static StaticConfinement resolve(WorkloadConfinement c, int defaultUid, int defaultGid, Path workspace, int abi,
                                     Path root, String uidMap, String gidMap) {
        Optional<String[]> user = Optional.empty();
        int uid = defaultUid;
        if (c.runAsUser().isPresent()) {
            String v = c.runAsUser().get();
            if (numeric(v)) {
                uid = Integer.parseInt(v);
            } else {
                String[] entry = lookup(root.resolve("etc/passwd"), v, "process.run_as_user");
                user = Optional.of(entry);
                uid = id(entry[2], "process.run_as_user", v);
            }
        }
        int gid = defaultGid;
        if (c.runAsGroup().isPresent()) {
            String v = c.runAsGroup().get();
            gid = numeric(v) ? Integer.parseInt(v) : id(lookup(root.resolve("etc/group"), v, "process.run_as_group")[2],
                    "process.run_as_group", v);
        } else if (user.isPresent()) {
            gid = id(user.get()[3], "process.run_as_user", c.runAsUser().get() + "'s primary group");
        }
        if (uid <= 0) {
            throw refuse("process.run_as_user " + c.runAsUser().orElse("") + " resolves to uid " + uid
                    + ": the workload never runs as root");
        }
        if (gid <= 0) {
            throw refuse("process.run_as_group " + c.runAsGroup().orElse(c.runAsUser().orElse(""))
                    + " resolves to gid " + gid + ": the workload never runs as root's group");
        }
        requireMapped(uidMap, uid, "process.run_as_user", "uid");
        requireMapped(gidMap, gid, c.runAsGroup().isPresent() ? "process.run_as_group" : "process.run_as_user", "gid");

        Set<String> ro = new LinkedHashSet<>(BASELINE_READ_ONLY);
        Set<String> rw = new LinkedHashSet<>(BASELINE_WRITABLE);
        if (c.filesystemDeclared()) {
            ro.addAll(c.readOnly());
            rw.addAll(c.readWrite());
            if (c.includeWorkdir()) {
                rw.add(workspace.toString());
            }
        } else {
            ro.addAll(WorkloadLaunch.READ_ONLY);
            rw.add(workspace.toString());
        }
        List<String> skipped = new ArrayList<>();
        List<String> readOnly = present(ro, skipped, c.filesystemDeclared());
        List<String> readWrite = present(rw, skipped, c.filesystemDeclared());
        LaunchPlan.Mode mode = c.landlockBestEffort() ? LaunchPlan.Mode.BEST_EFFORT : LaunchPlan.Mode.REQUIRED;
        LandlockOutcome landlock;
        try {
            landlock = LauncherProcess.landlockFor(mode, abi);
        } catch (LinuxException e) {
            throw refuse("landlock.compatibility is hard_requirement, but this kernel's Landlock ABI is " + abi
                    + (abi == 0 ? " (absent or disabled)" : "") + ": it cannot enforce filesystem_policy as the sandbox requires ("
                    + e.getMessage() + ")");
        }
        return new StaticConfinement(uid, gid, mode, readOnly, readWrite, skipped, landlock);
    }

    /**
     * The workspace was made for the launch's default workload uid; a policy user of another
     * uid that is to write it (include_workdir) gets it. Only the directory itself, and only when
     * it is the launch's (owned by the default uid inside this namespace), never a host directory.
     */
    void adoptWorkspace(Path workspace, int defaultUid) throws IOException {
        if (uid == defaultUid || !readWrite.contains(workspace.toString())) {
            return;
        }
        Object owner = Files.getAttribute(workspace, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (owner instanceof Integer o && o == defaultUid) {
            Files.setAttribute(workspace, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
            Files.setAttribute(workspace, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
        }
    }

    private static List<String> present(Set<String> paths, List<String> skipped, boolean report) {
        List<String> out = new ArrayList<>();
        for (String p : paths) {
            if (Files.exists(Path.of(p))) {
                out.add(p);
            } else if (report && !BASELINE_READ_ONLY.contains(p) && !BASELINE_WRITABLE.contains(p)) {
                skipped.add(p);
            }
        }
        return out;
    }

    private static boolean numeric(String v) {
        return !v.isEmpty() && v.chars().allMatch(Character::isDigit);
    }

    private static int id(String field, String what, String name) {
        try {
            return Integer.parseInt(field);
        } catch (NumberFormatException e) {
            throw refuse(what + " " + name + ": the workload's account entry has no numeric id ('" + field + "')");
        }
    }

    /** The entry named {@code name} in a passwd or group file of the workload's image. */
    private static String[] lookup(Path file, String name, String what) {
        try {
            if (!Files.isRegularFile(file) || Files.size(file) > MAX_ACCOUNT_FILE_BYTES) {
                throw refuse(what + " names '" + name + "', but the workload has no readable " + file
                        + " of at most " + MAX_ACCOUNT_FILE_BYTES + " bytes to resolve it in");
            }
            for (String line : Files.readAllLines(file)) {
                String[] fields = line.split(":", -1);
                if (fields.length >= 4 && fields[0].equals(name)) {
                    return fields;
                }
            }
        } catch (IOException e) {
            throw refuse(what + " names '" + name + "', but " + file + " cannot be read: " + e.getMessage());
        }
        throw refuse(what + " names '" + name + "', which is not in the workload's " + file);
    }

    /** Whether {@code id} is inside one of the namespace's map lines ({@code inside outside count}). */
    private static void requireMapped(String map, int id, String field, String kind) {
        List<String> ranges = new ArrayList<>();
        for (String line : map.strip().split("\n")) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 3) {
                continue;
            }
            long inside = Long.parseLong(f[0]);
            long count = Long.parseLong(f[2]);
            ranges.add(inside + "-" + (inside + count - 1));
            if (id >= inside && id < inside + count) {
                return;
            }
        }
        throw refuse(field + " asks for " + kind + " " + id + ", which is not mapped in this sandbox's user namespace"
                + " (mapped: " + ranges + "): it cannot be honoured, and the workload never runs as another " + kind);
    }

    private static BackendException refuse(String why) {
        return new BackendException(BackendException.Kind.INVALID, why);
    }
}
