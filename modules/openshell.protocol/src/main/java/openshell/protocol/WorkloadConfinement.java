package openshell.protocol;

import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The admitted policy's static sections as the runtime bundle carries them: the runtime lives next
 * to the workload and holds no policy, yet it is the one that applies these to every workload
 * process, so the gateway seals them into the launch. Not a secret.
 *
 * @param filesystemDeclared whether the policy has a {@code filesystem_policy} section (false: the
 *                           runtime's standard view, and the lists are empty)
 * @param readOnly           {@code filesystem_policy.read_only}
 * @param readWrite          {@code filesystem_policy.read_write}
 * @param includeWorkdir     {@code filesystem_policy.include_workdir}
 * @param landlockBestEffort {@code landlock.compatibility: best_effort} (false: hard requirement)
 * @param runAsUser          {@code process.run_as_user} as written: a number or a name
 * @param runAsGroup         {@code process.run_as_group} as written: a number or a name
 */
public record WorkloadConfinement(boolean filesystemDeclared, List<String> readOnly, List<String> readWrite,
                                  boolean includeWorkdir, boolean landlockBestEffort, Optional<String> runAsUser,
                                  Optional<String> runAsGroup) {
    /** Most paths in both lists together (the policy's and the launcher's bound). */
    public static final int MAX_PATHS = 256;
    /** Longest path (Linux PATH_MAX). */
    public static final int MAX_PATH_LENGTH = 4096;
    /** A positive decimal id, or a POSIX account name. */
    private static final Pattern ACCOUNT = Pattern.compile("[1-9][0-9]{0,9}|[a-z_][a-z0-9_-]{0,31}");

    /** Validates and copies; refuses root by number or name. */
    public WorkloadConfinement {
        readOnly = List.copyOf(readOnly);
        readWrite = List.copyOf(readWrite);
        if (readOnly.size() + readWrite.size() > MAX_PATHS) {
            throw invalid("at most " + MAX_PATHS + " confinement paths, got " + (readOnly.size() + readWrite.size()));
        }
        if (!filesystemDeclared && (!readOnly.isEmpty() || !readWrite.isEmpty() || includeWorkdir)) {
            throw invalid("confinement paths without a declared filesystem section");
        }
        for (String path : readOnly) {
            requirePath(path);
        }
        for (String path : readWrite) {
            requirePath(path);
            if (path.equals("/")) {
                throw invalid("the root directory is never writable");
            }
        }
        runAsUser.ifPresent(WorkloadConfinement::requireAccount);
        runAsGroup.ifPresent(WorkloadConfinement::requireAccount);
    }

    /** @return no filesystem section, Landlock required, the launch's default user and group */
    public static WorkloadConfinement standard() {
        return new WorkloadConfinement(false, List.of(), List.of(), false, false, Optional.empty(), Optional.empty());
    }

    private static void requirePath(String path) {
        if (path == null || !path.startsWith("/") || path.length() > MAX_PATH_LENGTH || path.indexOf('\0') >= 0) {
            throw invalid("not an absolute path: " + path);
        }
    }

    private static void requireAccount(String account) {
        if (!ACCOUNT.matcher(account).matches() || account.equals("root")) {
            throw invalid("run_as must be a positive id or an account name, never root: '" + account + "'");
        }
        if (Character.isDigit(account.charAt(0)) && Long.parseLong(account) > Integer.MAX_VALUE) {
            throw invalid("run_as id out of range: " + account);
        }
    }

    private static ProtocolException invalid(String detail) {
        return new ProtocolException(Refusal.BUNDLE_INVALID, "confinement: " + detail);
    }

    openshell.protocol.wire.WorkloadConfinement wire() {
        return openshell.protocol.wire.WorkloadConfinement.newBuilder().setFilesystemDeclared(filesystemDeclared)
                .addAllReadOnly(readOnly).addAllReadWrite(readWrite).setIncludeWorkdir(includeWorkdir)
                .setLandlockBestEffort(landlockBestEffort).setRunAsUser(runAsUser.orElse(""))
                .setRunAsGroup(runAsGroup.orElse("")).build();
    }

    static WorkloadConfinement of(openshell.protocol.wire.WorkloadConfinement wire) {
        if (!wire.getUnknownFields().asMap().isEmpty()) {
            throw invalid("unknown fields " + wire.getUnknownFields().asMap().keySet());
        }
        return new WorkloadConfinement(wire.getFilesystemDeclared(), wire.getReadOnlyList(), wire.getReadWriteList(),
                wire.getIncludeWorkdir(), wire.getLandlockBestEffort(), text(wire.getRunAsUser()), text(wire.getRunAsGroup()));
    }

    private static Optional<String> text(String value) {
        return value.isEmpty() ? Optional.empty() : Optional.of(value);
    }
}
