package openshell.linux;

import com.sun.jna.Memory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A reusable, preallocated buffer for one {@code struct seccomp_notif}: one per receiving thread,
 * filled by {@link SeccompListener#receive}. Accessors read the buffer directly, so handling a
 * notification allocates nothing. Copy what must outlive the next receive.
 */
public final class SeccompNotification {
    final Memory memory;
    final long address;
    private final ByteBuffer view;
    private final int size;

    SeccompNotification(int size) {
        this.size = Math.max(size, 80);
        this.memory = new Memory(this.size);
        this.address = LibC.address(memory);
        this.view = memory.getByteBuffer(0, this.size).order(ByteOrder.nativeOrder());
    }

    void clear() {
        for (int i = 0; i + 8 <= size; i += 8) {
            view.putLong(i, 0);
        }
    }

    /** @return the notification id; every response must carry it */
    public long id() {
        return view.getLong(0);
    }

    /** @return the thread id of the caller (in the listener's pid namespace) */
    public int pid() {
        return view.getInt(8);
    }

    /** @return the system call number */
    public int syscall() {
        return view.getInt(16);
    }

    /** @return the {@code AUDIT_ARCH_*} of the call */
    public int arch() {
        return view.getInt(20);
    }

    /** @return the caller's instruction pointer */
    public long instructionPointer() {
        return view.getLong(24);
    }

    /**
     * An argument of the call.
     *
     * @param index 0..5
     * @return the raw 64-bit value
     */
    public long argument(int index) {
        if (index < 0 || index > 5) {
            throw new LinuxException("seccomp notification", Errno.EINVAL, "argument index " + index);
        }
        return view.getLong(32 + 8 * index);
    }

    @Override
    public String toString() {
        return "seccomp notification " + Long.toUnsignedString(id()) + " pid " + pid() + " nr " + syscall();
    }
}
