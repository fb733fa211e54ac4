package openshell.linux;

/**
 * The seccomp program every workload process runs under (DESIGN §5), for x86-64:
 *
 * <table>
 * <caption>Decisions</caption>
 * <tr><th>Call</th><th>Decision</th></tr>
 * <tr><td>any call with another {@code AUDIT_ARCH} (i386 via {@code int 0x80}) or an x32 number</td><td>kill the process</td></tr>
 * <tr><td>{@code socket(AF_INET|AF_INET6, SOCK_STREAM|SOCK_DGRAM, 0|TCP|UDP)}</td><td>notify</td></tr>
 * <tr><td>{@code socket(AF_INET*, raw/other type or protocol (ICMP, SCTP))}</td><td>EPERM</td></tr>
 * <tr><td>{@code socket/socketpair(AF_UNIX)}, {@code socket(AF_NETLINK)}</td><td>allow (cannot leave the box)</td></tr>
 * <tr><td>{@code socket} of any other family (packet, vsock, ...)</td><td>EAFNOSUPPORT</td></tr>
 * <tr><td>{@code connect}, {@code bind}, {@code listen}, {@code sendmsg}, {@code sendmmsg}</td><td>notify</td></tr>
 * <tr><td>{@code sendto} with a destination address</td><td>notify; without one: allow</td></tr>
 * <tr><td>{@code getpeername}</td><td>notify (a mediated socket's peer is its relay; the runtime answers
 *     with the destination the workload connected to)</td></tr>
 * <tr><td>{@code io_uring_setup/enter/register}</td><td>EPERM (io_uring would bypass this filter)</td></tr>
 * <tr><td>{@code unshare} or {@code clone} with {@code CLONE_NEWUSER}</td><td>EPERM (a new user namespace would hand out capabilities again)</td></tr>
 * <tr><td>{@code clone3}</td><td>ENOSYS (its flags are behind a pointer; libc falls back to {@code clone})</td></tr>
 * <tr><td>{@code keyctl}, {@code add_key}, {@code request_key}</td><td>EPERM (the kernel's keyrings are not
 *     namespaced: a key is shared by everything that runs as its host uid, in any sandbox or none)</td></tr>
 * <tr><td>{@code bpf}, {@code perf_event_open}, {@code userfaultfd}</td><td>EPERM whatever the host's sysctls
 *     let unprivileged users do (kernel attack surface, and a way to widen races, that no agent needs)</td></tr>
 * <tr><td>everything else</td><td>allow</td></tr>
 * </table>
 *
 * {@code connect}, {@code bind} and {@code sendmsg} are notified for every family because a filter
 * cannot see a socket's family; the handler answers {@code CONTINUE} quickly for AF_UNIX.
 */
public final class WorkloadFilter {
    /** x86-64 system call numbers the filter names. */
    static final int NR_SOCKET = 41;
    static final int NR_CONNECT = 42;
    static final int NR_SENDTO = 44;
    static final int NR_SENDMSG = 46;
    static final int NR_BIND = 49;
    static final int NR_LISTEN = 50;
    static final int NR_GETPEERNAME = 52;
    static final int NR_SOCKETPAIR = 53;
    static final int NR_SENDMMSG = 307;
    static final int NR_CLONE = 56;
    static final int NR_UNSHARE = 272;
    static final int NR_CLONE3 = 435;
    static final int NR_IO_URING_SETUP = 425;
    static final int NR_IO_URING_ENTER = 426;
    static final int NR_IO_URING_REGISTER = 427;
    static final int NR_ADD_KEY = 248;
    static final int NR_REQUEST_KEY = 249;
    static final int NR_KEYCTL = 250;
    static final int NR_PERF_EVENT_OPEN = 298;
    static final int NR_BPF = 321;
    static final int NR_USERFAULTFD = 323;

    static final int AF_UNIX = 1;
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int AF_NETLINK = 16;
    static final int SOCK_STREAM = 1;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_TYPE_MASK = 0xf;
    static final int IPPROTO_TCP = 6;
    static final int IPPROTO_UDP = 17;

    private WorkloadFilter() {
    }

    /** @return the program */
    public static BpfProgram program() {
        return BpfProgram.builder()
                .loadArch()
                .jumpIfNotEqual(Seccomp.AUDIT_ARCH_X86_64, "kill")
                .loadNr()
                .jumpIfAtLeast(Seccomp.X32_SYSCALL_BIT, "kill")
                .jumpIfEqual(NR_SOCKET, "socket")
                .jumpIfEqual(NR_SOCKETPAIR, "socketpair")
                .jumpIfEqual(NR_CONNECT, "notify")
                .jumpIfEqual(NR_BIND, "notify")
                .jumpIfEqual(NR_LISTEN, "notify")
                .jumpIfEqual(NR_SENDMSG, "notify")
                .jumpIfEqual(NR_SENDMMSG, "notify")
                .jumpIfEqual(NR_GETPEERNAME, "notify")
                .jumpIfEqual(NR_SENDTO, "sendto")
                .jumpIfEqual(NR_IO_URING_SETUP, "eperm")
                .jumpIfEqual(NR_IO_URING_ENTER, "eperm")
                .jumpIfEqual(NR_IO_URING_REGISTER, "eperm")
                .jumpIfEqual(NR_CLONE, "clone")
                .jumpIfEqual(NR_UNSHARE, "clone")
                .jumpIfEqual(NR_CLONE3, "enosys")
                .jumpIfEqual(NR_ADD_KEY, "eperm")
                .jumpIfEqual(NR_REQUEST_KEY, "eperm")
                .jumpIfEqual(NR_KEYCTL, "eperm")
                .jumpIfEqual(NR_PERF_EVENT_OPEN, "eperm")
                .jumpIfEqual(NR_BPF, "eperm")
                .jumpIfEqual(NR_USERFAULTFD, "eperm")
                .ret(Seccomp.RET_ALLOW)
                .label("clone")
                .loadArgLow(0)
                .jumpIfAnySet(NamespaceType.USER.cloneFlag(), "eperm")
                .ret(Seccomp.RET_ALLOW)
                .label("socket")
                .loadArgLow(0)
                .jumpIfEqual(AF_UNIX, "allow")
                .jumpIfEqual(AF_NETLINK, "allow")
                .jumpIfEqual(AF_INET, "inet")
                .jumpIfEqual(AF_INET6, "inet")
                .ret(Seccomp.errno(Errno.EAFNOSUPPORT))
                .label("inet")
                .loadArgLow(1)
                .and(SOCK_TYPE_MASK)
                .jumpIfEqual(SOCK_STREAM, "protocol")
                .jumpIfEqual(SOCK_DGRAM, "protocol")
                .ret(Seccomp.errno(Errno.EPERM))
                .label("protocol")
                .loadArgLow(2)
                .jumpIfEqual(0, "notify")
                .jumpIfEqual(IPPROTO_TCP, "notify")
                .jumpIfEqual(IPPROTO_UDP, "notify")
                .ret(Seccomp.errno(Errno.EPERM))
                .label("socketpair")
                .loadArgLow(0)
                .jumpIfEqual(AF_UNIX, "allow")
                .ret(Seccomp.errno(Errno.EAFNOSUPPORT))
                .label("sendto")
                .loadArgLow(4)
                .jumpIfNotEqual(0, "notify")
                .loadArgHigh(4)
                .jumpIfNotEqual(0, "notify")
                .ret(Seccomp.RET_ALLOW)
                .label("notify")
                .ret(Seccomp.RET_USER_NOTIF)
                .label("allow")
                .ret(Seccomp.RET_ALLOW)
                .label("eperm")
                .ret(Seccomp.errno(Errno.EPERM))
                .label("enosys")
                .ret(Seccomp.errno(Errno.ENOSYS))
                .label("kill")
                .ret(Seccomp.RET_KILL_PROCESS)
                .build();
    }
}
