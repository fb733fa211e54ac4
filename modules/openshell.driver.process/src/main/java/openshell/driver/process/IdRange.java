package openshell.driver.process;

import openshell.driver.DriverException;

/**
 * The host uids and gids one sandbox's user namespace maps to: {@link #SIZE} ids starting at
 * {@code first}, mapped to 0.. inside. Ranges of different sandboxes never overlap, so files and
 * signals of one sandbox are foreign to every other.
 *
 * @param first the first host id, at or above {@link #BASE}
 */
record IdRange(long first) {
    /** Ids per sandbox: a full 16-bit range, as container runtimes use. */
    static final long SIZE = 65_536;
    /** Lowest host id handed out; far above any login or system account. */
    static final long BASE = 1_000_000_000L;
    /** Most slots: keeps every id below 2^32 - 1 (the kernel's invalid id). */
    static final int MAX_SLOTS = (int) ((0xFFFF_FFFEL - BASE) / SIZE);

    IdRange {
        if (first < BASE || (first - BASE) % SIZE != 0 || first + SIZE > 0xFFFF_FFFEL) {
            throw new DriverException(DriverException.Kind.INVALID, "not a sandbox id range: " + first);
        }
    }

    static IdRange slot(int slot) {
        if (slot < 0 || slot >= MAX_SLOTS) {
            throw new DriverException(DriverException.Kind.INVALID, "id range slot out of range: " + slot);
        }
        return new IdRange(BASE + slot * SIZE);
    }

    /** @return the line written to {@code uid_map} and {@code gid_map} */
    String mapLine() {
        return "0 " + first + " " + SIZE + "\n";
    }
}
