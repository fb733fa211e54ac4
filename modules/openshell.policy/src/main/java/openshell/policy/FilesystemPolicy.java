package openshell.policy;

import java.util.List;

/**
 * The static filesystem section: what the sandbox runtime turns into Landlock rules before the
 * workload starts. Fixed at creation; a reload never changes it. Paths are absolute, canonical
 * (no {@code .}, {@code ..}, empty segments or trailing slash) and a read-write path is never
 * {@code /}.
 *
 * @param readOnly       paths the workload may read (copied)
 * @param readWrite      paths the workload may read and write (copied)
 * @param includeWorkdir whether the workload's working directory is added read-write
 */
public record FilesystemPolicy(List<String> readOnly, List<String> readWrite, boolean includeWorkdir) {
    /** Copies the lists. */
    public FilesystemPolicy {
        readOnly = List.copyOf(readOnly);
        readWrite = List.copyOf(readWrite);
    }

    /** @return no paths and no working directory: the section's value when it is absent */
    public static FilesystemPolicy none() {
        return new FilesystemPolicy(List.of(), List.of(), false);
    }
}
