package openshell.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Admits a Unix peer only if the process that connected is a given process or one of its
 * descendants: the uid alone names a user, not the runtime this supervisor was started for.
 * The peer's pid is the kernel's ({@code SO_PEERCRED}, captured at connect); its ancestry is
 * walked up {@code /proc/<pid>/stat} at most {@link ProtocolLimits#MAX_PEER_ANCESTRY}
 * generations. The root's start time is taken when the policy is made, so a root that exited
 * and whose pid was reused admits nobody.
 */
final class PeerAncestry implements UnixPeerPolicy {
    private final Path proc;
    private final long root;
    private final long rootStart;

    private PeerAncestry(Path proc, long root, long rootStart) {
        this.proc = proc;
        this.root = root;
        this.rootStart = rootStart;
    }

    /**
     * @param proc where procfs is mounted ({@code /proc}; a directory of the same shape in tests)
     * @param root the pid at the top of the admitted tree
     * @return the policy
     * @throws ProtocolException {@link Refusal#INVALID_ARGUMENT} when the root is not a live process
     */
    static PeerAncestry of(Path proc, long root) {
        if (root <= 1) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT, "process tree root must be a pid above 1: " + root);
        }
        Stat stat = Stat.read(proc, root).orElseThrow(() -> new ProtocolException(Refusal.INVALID_ARGUMENT,
                "process tree root " + root + " is not a running process"));
        return new PeerAncestry(proc, root, stat.start());
    }

    @Override
    public void check(UnixPeer peer) {
        check(peer.pid());
    }

    void check(long pid) {
        if (pid <= 0) {
            throw refused("the peer's pid is not visible from this pid namespace");
        }
        long current = pid;
        for (int generation = 0; generation <= ProtocolLimits.MAX_PEER_ANCESTRY; generation++) {
            if (current == root) {
                // The root must still be the process this policy was made for.
                if (Stat.read(proc, root).map(Stat::start).orElse(-1L) != rootStart) {
                    throw refused("peer pid " + pid + ": the process tree's root " + root + " has exited");
                }
                return;
            }
            Optional<Stat> stat = Stat.read(proc, current);
            if (stat.isEmpty()) {
                throw refused("peer pid " + pid + " is gone");
            }
            current = stat.get().parent();
            if (current <= 0) {
                throw refused("peer pid " + pid + " is not in the process tree of " + root);
            }
        }
        throw refused("peer pid " + pid + " is more than " + ProtocolLimits.MAX_PEER_ANCESTRY
                + " generations below any process tree root " + root + " (or not under it)");
    }

    private static ProtocolException refused(String why) {
        return new ProtocolException(Refusal.PEER_REFUSED, why);
    }

    /** The two fields of {@code /proc/<pid>/stat} this check needs. */
    private record Stat(long parent, long start) {
        static Optional<Stat> read(Path proc, long pid) {
            String line;
            try {
                line = Files.readString(proc.resolve(Long.toString(pid)).resolve("stat"), StandardCharsets.UTF_8);
            } catch (IOException e) {
                return Optional.empty();
            }
            // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
            int end = line.lastIndexOf(')');
            if (end < 0) {
                return Optional.empty();
            }
            String[] fields = line.substring(end + 1).trim().split(" ");
            // fields[0] is field 3 (state): the parent is field 4, the start time field 22.
            if (fields.length < 20) {
                return Optional.empty();
            }
            try {
                return Optional.of(new Stat(Long.parseLong(fields[1]), Long.parseLong(fields[19])));
            } catch (NumberFormatException e) {
                return Optional.empty();
            }
        }
    }
}
