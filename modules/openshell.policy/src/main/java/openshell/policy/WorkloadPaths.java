package openshell.policy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * How a generation expands the literal binary paths of a policy through symlinks, as the workload
 * sees its own filesystem. The kernel reports an executable by its real path, so a policy that
 * lists {@code /usr/bin/python3} must also match {@code /usr/bin/python3.11} when the first is a
 * link to the second; upstream expands at load, and so does a {@link PolicyGeneration} given one
 * of these. Expansion only ever adds the target: the written path keeps matching.
 */
@FunctionalInterface
public interface WorkloadPaths {
    /** Most symlinks followed while resolving one path (Linux's own limit, ELOOP beyond it). */
    int MAX_SYMLINK_HOPS = 40;

    /**
     * @param absolutePath a literal binary path from the policy
     * @return the real path it resolves to in the workload's view, if it resolves to something else
     */
    Optional<String> resolve(String absolutePath);

    /** @return no expansion: paths match as written (when the workload's filesystem is not visible) */
    static WorkloadPaths asWritten() {
        return path -> Optional.empty();
    }

    /**
     * Resolves paths inside {@code root} as if it were {@code /} (for example
     * {@code /proc/<pid>/root} of the workload's first process, or an image's unpacked root): an
     * absolute link target is taken from {@code root}, {@code ..} never climbs above it. A path
     * that does not resolve (missing, a loop, more than {@link #MAX_SYMLINK_HOPS} links) is left
     * as written.
     *
     * @param root the workload's root directory, as this process sees it
     * @return the resolver
     */
    static WorkloadPaths within(Path root) {
        Objects.requireNonNull(root, "root");
        return path -> Optional.ofNullable(realPath(root, path)).filter(r -> !r.equals(path));
    }

    private static String realPath(Path root, String absolutePath) {
        if (!absolutePath.startsWith("/")) {
            return null;
        }
        Deque<String> pending = new ArrayDeque<>();
        for (String s : absolutePath.substring(1).split("/")) {
            pending.addLast(s);
        }
        List<String> done = new ArrayList<>();
        int hops = 0;
        while (!pending.isEmpty()) {
            String s = pending.removeFirst();
            if (s.isEmpty() || s.equals(".")) {
                continue;
            }
            if (s.equals("..")) {
                if (!done.isEmpty()) {
                    done.removeLast();
                }
                continue;
            }
            done.add(s);
            Path here = root.resolve(String.join("/", done));
            if (Files.isSymbolicLink(here)) {
                if (++hops > MAX_SYMLINK_HOPS) {
                    return null;
                }
                String target;
                try {
                    target = Files.readSymbolicLink(here).toString();
                } catch (IOException | UnsupportedOperationException e) {
                    return null;
                }
                done.removeLast();
                if (target.startsWith("/")) {
                    done.clear();
                }
                String[] parts = target.split("/");
                for (int i = parts.length - 1; i >= 0; i--) {
                    pending.addFirst(parts[i]);
                }
            } else if (!Files.exists(here, LinkOption.NOFOLLOW_LINKS)) {
                return null;
            }
        }
        return "/" + String.join("/", done);
    }
}
