package openshell.perf.linux;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/** The one system call the benchmark's filtered thread makes, bound by JNA direct mapping. */
final class Sys {
    static {
        Native.register(Sys.class, NativeLibrary.getInstance("c"));
    }

    private Sys() {
    }

    static native int socket(int domain, int type, int protocol);
}
