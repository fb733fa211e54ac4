package openshell.protocol;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.nio.channels.SocketChannel;

/**
 * The peer's pid and numeric uid from {@code SO_PEERCRED}, which the JDK reads but does not
 * expose (its {@code UnixDomainPrincipal} carries only user and group, by name where one exists). Reading it takes the channel's
 * descriptor, which only the JDK's {@code sun.nio.ch} gives out: a JVM that is to check a Unix
 * peer's process tree is started with {@value #JVM_OPTIONS}. Without them the check cannot run,
 * and says so at set-up time ({@link #requireAvailable()}) and refuses every peer.
 */
final class PeerCredentials {
    /** The JVM options that make the peer's pid readable; the supervisor image's launcher has them. */
    static final String JVM_OPTIONS = "--add-exports=java.base/sun.nio.ch=openshell.protocol "
            + "--enable-native-access=openshell.protocol";

    private static final int SOL_SOCKET = 1;
    private static final int SO_PEERCRED = 17;
    /** {@code struct ucred}: pid, uid, gid, each 32 bits. */
    private static final StructLayout UCRED = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("pid"), ValueLayout.JAVA_INT.withName("uid"),
            ValueLayout.JAVA_INT.withName("gid"));
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private PeerCredentials() {
    }

    /** Whether this JVM can read a peer's pid. */
    static boolean available() {
        Module self = PeerCredentials.class.getModule();
        return Object.class.getModule().isExported("sun.nio.ch", self)
                && (!self.isNamed() || self.isNativeAccessEnabled());
    }

    /**
     * Fails unless this JVM can read a peer's pid.
     *
     * @throws ProtocolException {@link Refusal#PEER_REFUSED}, naming the missing JVM options
     */
    static void requireAvailable() {
        if (!available()) {
            throw new ProtocolException(Refusal.PEER_REFUSED,
                    "cannot read a Unix peer's pid: this JVM was not started with " + JVM_OPTIONS);
        }
    }

    /**
     * The pid of the process that connected (or listened, seen from the dialing side), as this
     * process's pid namespace numbers it: 0 when that process is in a pid namespace this one
     * cannot see.
     *
     * @param channel a connected Unix socket channel
     * @return the pid
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when it cannot be read
     */
    static long pid(SocketChannel channel) {
        return Integer.toUnsignedLong(read(channel, 0));
    }

    /**
     * The uid of the process that connected, as this process's user namespace maps it (the
     * overflow uid, 65534, when it is not mapped here). A number, unlike the JDK's principal,
     * which gives a name whenever this host's passwd has one for it.
     *
     * @param channel a connected Unix socket channel
     * @return the uid
     * @throws ProtocolException {@link Refusal#PEER_REFUSED} when it cannot be read
     */
    static long uid(SocketChannel channel) {
        return Integer.toUnsignedLong(read(channel, 4));
    }

    /** One 32-bit field of the peer's {@code struct ucred}, at {@code offset}. */
    private static int read(SocketChannel channel, long offset) {
        requireAvailable();
        int fd = Descriptor.of(channel);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment credentials = arena.allocate(UCRED);
            MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, (int) UCRED.byteSize());
            MemorySegment state = arena.allocate(CALL_STATE);
            int result;
            try {
                result = (int) Native.GETSOCKOPT.invokeExact(state, fd, SOL_SOCKET, SO_PEERCRED, credentials, length);
            } catch (Throwable e) {
                throw new ProtocolException(Refusal.PEER_REFUSED, "getsockopt(SO_PEERCRED) failed: " + e, e);
            }
            if (result != 0) {
                throw new ProtocolException(Refusal.PEER_REFUSED,
                        "getsockopt(SO_PEERCRED) failed: errno " + (int) ERRNO.get(state, 0L));
            }
            return credentials.get(ValueLayout.JAVA_INT, offset);
        }
    }

    /**
     * The channel's descriptor, through {@code sun.nio.ch.SelChImpl.getFDVal()}. Looked up, not
     * linked: javac's {@code --release} cannot compile against a non-exported JDK package, and a
     * JVM without the export fails in {@link #requireAvailable()} first.
     */
    private static final class Descriptor {
        static final Class<?> SELECTABLE;
        static final MethodHandle FD_VALUE;

        static {
            try {
                SELECTABLE = Class.forName("sun.nio.ch.SelChImpl");
                FD_VALUE = MethodHandles.lookup().findVirtual(SELECTABLE, "getFDVal", MethodType.methodType(int.class));
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        static int of(SocketChannel channel) {
            if (!SELECTABLE.isInstance(channel)) {
                throw new ProtocolException(Refusal.PEER_REFUSED, "not a JDK socket channel: " + channel.getClass());
            }
            try {
                return (int) FD_VALUE.invoke(channel);
            } catch (Throwable e) {
                throw new ProtocolException(Refusal.PEER_REFUSED, "cannot read the channel's descriptor: " + e, e);
            }
        }
    }

    /** The downcall, bound on first use. */
    @SuppressWarnings("restricted")
    private static final class Native {
        static final MethodHandle GETSOCKOPT;

        static {
            Linker linker = Linker.nativeLinker();
            GETSOCKOPT = linker.downcallHandle(linker.defaultLookup().find("getsockopt").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS),
                    Linker.Option.captureCallState("errno"));
        }
    }
}
