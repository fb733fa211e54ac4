/**
 * Linux kernel primitives over JNA, and the workload launcher: the part of OpenShell that talks to
 * the kernel, so that every other module can stay in plain Java. The launcher itself is a small
 * static C program ({@code src/main/c/openshell-launcher.c}, built by {@code build.sh} with gcc);
 * {@code LauncherProcess} is its parent's side and makes every decision it applies.
 *
 * <h2>Who may use it</h2>
 * Nothing is exported publicly. The API lives in package {@code openshell.linux}, exported
 * ({@code exports openshell.linux to ...}) to {@code openshell.sandbox} and {@code
 * openshell.supervisor} (its native relay and socket calls); {@code openshell.driver.process} and
 * {@code openshell.driver.vm} join when they first need it: a qualified export to a module that
 * does not exist yet fails the {@code -Xlint -Werror} build, so the export arrives with its friend.
 *
 * <h2>Calling the kernel</h2>
 * Every call goes through JNA <em>direct mapping</em> ({@code Native.register}): {@code static
 * native} methods with primitive or address arguments on preallocated memory, no {@code Structure}
 * reflection, so the seccomp notification path ({@code SeccompListener}, {@code
 * SeccompNotification}, {@code TaskMemory}) allocates nothing per call. A failing call throws
 * {@code LinuxException}, which names the call and the errno; outcomes that are normal (a
 * notification whose caller died, a process that already exited) are return values instead.
 *
 * <h2>Threads</h2>
 * A JVM is always multithreaded, and the kernel treats several of these primitives per thread:
 * seccomp filters, no_new_privs, capability sets, the bounding set and Landlock domains bind only
 * the calling thread (and what it {@code execve}s); {@code setns}/{@code unshare} of net, uts,
 * ipc, cgroup and mount (unshare only) move only the calling thread; a JVM can neither create nor
 * enter a user namespace, nor {@code setns} into a mount namespace (EINVAL). uid/gid/groups go
 * through glibc, which applies them to every thread. A JVM cannot fork either, which is why the
 * launcher is native: a single-threaded program that does everything on the one thread that
 * finally calls {@code execve} (a JVM per launch cost 0.35-0.45 s of CPU and 42 MiB). It is
 * started by its parent <em>inside</em> the user, mount and pid namespaces of the workload (it
 * checks and refuses otherwise) and enters the others the plan names.
 *
 * <h2>JNA's native library</h2>
 * JNA's {@code libjnidispatch.so} is never unpacked into a writable temporary directory at run
 * time. Every JVM that loads this module runs with {@code -Djna.nounpack=true
 * -Djna.noclasspath=true -Djna.boot.library.path=<dir>} and {@code
 * --enable-native-access=com.sun.jna}. The build unpacks the library from the {@code jna-jpms}
 * jar into {@code target/jna/com/sun/jna/linux-x86-64} (maven-dependency-plugin) for tests; each
 * runtime image (sandbox and supervisor) copies the same file into its read-only {@code lib/jna}
 * directory and passes that directory. The images also run with {@code
 * -Djna.platform.library.path=} (empty): otherwise JNA's {@code NativeLibrary} runs {@code
 * /sbin/ldconfig -p} as a child process to build a search path, which costs ~100 ms of every cold
 * start; libc is opened by its soname and needs no search path.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds, their owner, and what happens at the bound</caption>
 * <tr><th>Constant</th><th>Value</th><th>Beyond it</th></tr>
 * <tr><td>{@code BpfProgram.MAX_INSTRUCTIONS}</td><td>4096 (kernel's BPF_MAXINSNS)</td><td>EINVAL before the kernel sees it</td></tr>
 * <tr><td>{@code TaskMemory.MAX_TRANSFER}</td><td>4096 bytes</td><td>EINVAL, nothing read</td></tr>
 * <tr><td>{@code UnixSockets.MAX_FDS_PER_MESSAGE}</td><td>16</td><td>EINVAL on send; on receive the message is refused (EMSGSIZE) and received fds are closed</td></tr>
 * <tr><td>{@code UnixSockets.MAX_MESSAGE_BYTES}</td><td>1 MiB</td><td>EINVAL</td></tr>
 * <tr><td>{@code LaunchPlan.MAX_PLAN_BYTES}</td><td>128 KiB</td><td>E2BIG when encoding; the launcher refuses a larger message (EMSGSIZE at step PLAN)</td></tr>
 * <tr><td>{@code LaunchPlan.MAX_LANDLOCK_PATHS}</td><td>256</td><td>EINVAL building the plan</td></tr>
 * <tr><td>{@code LauncherProcess.PLAN_WAIT}</td><td>10 min</td><td>a launcher without a plan exits; the target never runs</td></tr>
 * <tr><td>{@code LauncherProcess.ACK_WAIT}</td><td>60 s</td><td>step ACKNOWLEDGEMENT fails with ECANCELED; the target never runs</td></tr>
 * <tr><td>{@code ChildProcess.MAX_CHILD_FD}</td><td>63</td><td>EBADF</td></tr>
 * <tr><td>{@code ChildProcess.MAX_ARGUMENTS}</td><td>4096 argv or envp entries</td><td>EINVAL</td></tr>
 * <tr><td>{@code Credentials.MAX_GROUPS}</td><td>65536 (NGROUPS_MAX)</td><td>EINVAL</td></tr>
 * <tr><td>{@code Namespaces.MAX_ID_MAP_LINES}</td><td>340</td><td>EINVAL, nothing written</td></tr>
 * <tr><td>{@code UnixSockets.MAX_PATH_BYTES}</td><td>107 (sockaddr_un)</td><td>EINVAL, nothing bound or dialled</td></tr>
 * <tr><td>{@code UnixSockets.PATH_BACKLOG}</td><td>4</td><td>the kernel refuses further connects until one is accepted</td></tr>
 * <tr><td>{@code SpliceRelay.MAX_RELAYS}</td><td>4096 per loop</td><td>EAGAIN, both sockets closed</td></tr>
 * <tr><td>{@code SpliceRelay.PIPE_BYTES}</td><td>1 MiB per pipe, two pipes per relay (asked for; the kernel may refuse)</td><td>the pipe keeps its default 64 KiB</td></tr>
 * <tr><td>{@code SpliceRelay.CHUNK_BYTES}</td><td>1 MiB per splice call</td><td>the rest moves on the next call</td></tr>
 * <tr><td>{@code SpliceRelay.TURN_BYTES}</td><td>4 MiB per direction per turn</td><td>the direction waits for the next turn (fairness between relays)</td></tr>
 * <tr><td>{@code SpliceRelay.CLOSE_WAIT}</td><td>10 s</td><td>{@code close()} fails with ETIMEDOUT (a callback blocked the loop)</td></tr>
 * </table>
 */
// Friends are compiled after this module, so javac cannot see them here (lint "module").
@SuppressWarnings("module")
module openshell.linux {
    exports openshell.linux to openshell.sandbox, openshell.supervisor;

    requires com.sun.jna;
}
