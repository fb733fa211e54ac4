package openshell.linux;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

/**
 * The C library and raw system calls through JNA direct mapping: {@code static native} methods
 * bound once with {@link Native#register}, so a call costs a JNI transition and no reflection.
 * Arguments are primitives or addresses of preallocated memory. After a call that returns -1,
 * {@link Native#getLastError()} holds the thread's errno (JNA preserves it by default).
 */
final class LibC {
    // x86-64 system call numbers for calls glibc 2.36 has no wrapper for (or whose wrapper we avoid).
    static final long SYS_PRCTL = 157;
    static final long SYS_CAPGET = 125;
    static final long SYS_CAPSET = 126;
    static final long SYS_GETTID = 186;
    static final long SYS_SECCOMP = 317;
    static final long SYS_PROCESS_VM_READV = 310;
    static final long SYS_PROCESS_VM_WRITEV = 311;
    static final long SYS_PIDFD_SEND_SIGNAL = 424;
    static final long SYS_PIDFD_OPEN = 434;
    static final long SYS_CLOSE_RANGE = 436;
    static final long SYS_PIDFD_GETFD = 438;
    static final long SYS_LANDLOCK_CREATE_RULESET = 444;
    static final long SYS_LANDLOCK_ADD_RULE = 445;
    static final long SYS_LANDLOCK_RESTRICT_SELF = 446;
    static final long SYS_SETRESUID = 117;
    static final long SYS_SETRESGID = 119;
    static final long SYS_SETGROUPS = 116;

    static {
        // By soname: the dynamic linker resolves it, with or without JNA's search path.
        Native.register(LibC.class, NativeLibrary.getInstance("libc.so.6"));
    }

    private LibC() {
    }

    /** Forces registration (and loading of JNA's dispatch library) at a chosen moment. */
    static void load() {
        // The static initializer does the work.
    }

    static int errno() {
        return Native.getLastError();
    }

    /** Returns {@code result}, or throws for the thread's errno when it is negative. */
    static int check(int result, String call) {
        if (result < 0) {
            throw LinuxException.last(call);
        }
        return result;
    }

    /** Returns {@code result}, or throws for the thread's errno when it is negative. */
    static long check(long result, String call) {
        if (result < 0) {
            throw LinuxException.last(call);
        }
        return result;
    }

    /** Address of JNA-allocated memory, for the {@code long} parameters above. */
    static long address(Pointer memory) {
        return Pointer.nativeValue(memory);
    }

    /** glibc's syscall() is written in assembly and takes six register arguments. */
    static native long syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6);

    static native int open(String path, int flags, int mode);

    static native int close(int fd);

    static native long read(int fd, long buffer, long count);

    static native long write(int fd, long buffer, long count);

    static native long pread(int fd, long buffer, long count, long offset);

    static native long pwrite(int fd, long buffer, long count, long offset);

    static native int ioctl(int fd, long request, long argument);

    static native int fcntl(int fd, int command, long argument);

    static native int dup(int fd);

    static native int pipe2(int[] fds, int flags);

    static native int poll(long fds, long count, int timeoutMillis);

    static native int socket(int domain, int type, int protocol);

    static native int socketpair(int domain, int type, int protocol, int[] fds);

    static native int connect(int fd, long address, int length);

    static native int bind(int fd, long address, int length);

    static native int listen(int fd, int backlog);

    static native int accept4(int fd, long address, long lengthAddress, int flags);

    static native long sendmsg(int fd, long message, int flags);

    static native long recvmsg(int fd, long message, int flags);

    static native int getsockopt(int fd, int level, int name, long value, long lengthAddress);

    static native int setsockopt(int fd, int level, int name, long value, int length);

    static native int shutdown(int fd, int how);

    /** Offsets are always 0 (NULL) here: sockets and pipes have none. */
    static native long splice(int fdIn, long offsetIn, int fdOut, long offsetOut, long length, int flags);

    static native int epoll_create1(int flags);

    /** {@code event} is the address of a 12-byte packed {@code struct epoll_event} (x86-64). */
    static native int epoll_ctl(int epfd, int op, int fd, long event);

    static native int epoll_wait(int epfd, long events, int maxEvents, int timeoutMillis);

    static native int eventfd(int initialValue, int flags);

    static native int getpid();

    /** glibc's wrapper applies the change to every thread of the process (setxid broadcast). */
    static native int setresuid(int ruid, int euid, int suid);

    /** glibc's wrapper applies the change to every thread of the process (setxid broadcast). */
    static native int setresgid(int rgid, int egid, int sgid);

    /** glibc's wrapper applies the change to every thread of the process (setxid broadcast). */
    static native int setgroups(long size, int[] list);

    static native int getgroups(int size, int[] list);

    static native int setsid();

    static native int unshare(int flags);

    static native int setns(int fd, int nstype);

    static native int waitid(int idType, int id, long info, int options);

    static native int getrlimit(int resource, long limit);

    static native int prlimit(int pid, int resource, long newLimit, long oldLimit);

    static native int execve(String path, Pointer argv, Pointer envp);

    static native int chdir(String path);

    static native int pthread_sigmask(int how, long set, long oldSet);

    static native int sigemptyset(long set);

    static native int sigfillset(long set);

    static native int posix_openpt(int flags);

    static native int grantpt(int fd);

    static native int unlockpt(int fd);

    static native int ptsname_r(int fd, byte[] buffer, long length);

    static native int posix_spawn(int[] pid, String path, long fileActions, long attributes, Pointer argv, Pointer envp);

    static native int posix_spawn_file_actions_init(long actions);

    static native int posix_spawn_file_actions_destroy(long actions);

    static native int posix_spawn_file_actions_adddup2(long actions, int fd, int newFd);

    static native int posix_spawn_file_actions_addclosefrom_np(long actions, int from);

    static native int posix_spawnattr_init(long attributes);

    static native int posix_spawnattr_destroy(long attributes);

    static native int posix_spawnattr_setflags(long attributes, short flags);

    static native int posix_spawnattr_setsigmask(long attributes, long set);

    static native int posix_spawnattr_setsigdefault(long attributes, long set);
}
