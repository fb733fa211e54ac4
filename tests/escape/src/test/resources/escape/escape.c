/*
 * Bypass attempts run as a workload process of a real sandbox; each prints "name outcome" (the
 * errno's name, or SUCCEEDED). argv: the runtime's pid (in the sandbox's pid namespace), the
 * upstream's IPv4 address (the stand-in DNS gives the sandbox for its operator alias) and port:
 * every TCP attempt aims at that upstream, whose policy allows only another binary, so the test
 * can also assert that no byte arrived there (one more aims at the port on 127.0.0.1, where the
 * upstream really listens on the host: the sandbox's loopback is its own); the name of an
 * abstract Unix socket a host process listens on; and the id and key of a host shared-memory segment.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, int rc) {
    printf("%s %s\n", name, rc < 0 ? strerrorname_np(errno) : "SUCCEEDED");
    fflush(stdout);
}

static struct sockaddr_in v4(const char *ip, int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: escape RUNTIME_PID UPSTREAM_IP UPSTREAM_PORT HOST_ABSTRACT_SOCKET HOST_SHM_ID HOST_SHM_KEY\n");
        return 64;
    }
    pid_t runtime = atoi(argv[1]);
    const char *upstream = argv[2];
    int port = atoi(argv[3]);
    char path[128];

    report("raw-socket", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
    report("packet-socket", socket(AF_PACKET, SOCK_RAW, htons(3)));
    report("vsock-socket", socket(40, SOCK_STREAM, 0));
    report("sctp-socket", socket(AF_INET, SOCK_STREAM, 132));

    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in out = v4("8.8.8.8", 53);
    report("udp-sendto-outside", sendto(udp, "x", 1, 0, (struct sockaddr *)&out, sizeof out));
    report("udp-connect-outside", connect(udp, (struct sockaddr *)&out, sizeof out));
    struct iovec iov = {.iov_base = "x", .iov_len = 1};
    struct msghdr msg = {.msg_name = &out, .msg_namelen = sizeof out, .msg_iov = &iov, .msg_iovlen = 1};
    report("udp-sendmsg-outside", sendmsg(udp, &msg, 0));
    struct mmsghdr mm[2] = {{.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}}, {.msg_hdr = msg}};
    report("udp-sendmmsg-second-outside", sendmmsg(udp, mm, 2, 0));

    struct sockaddr_in udp_upstream = v4(upstream, port);
    report("udp-sendto-upstream", sendto(udp, "x", 1, 0, (struct sockaddr *)&udp_upstream, sizeof udp_upstream));

    /* The upstream as an IPv4-mapped IPv6 address: mediated like IPv4, and this binary is not allowed. */
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    char mapped[64];
    snprintf(mapped, sizeof mapped, "::ffff:%s", upstream);
    inet_pton(AF_INET6, mapped, &v6.sin6_addr);
    int t6 = socket(AF_INET6, SOCK_STREAM, 0);
    report("ipv6-mapped-connect", connect(t6, (struct sockaddr *)&v6, sizeof v6));
    struct sockaddr_in6 doc = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    inet_pton(AF_INET6, "2001:db8::1", &doc.sin6_addr);
    int t6b = socket(AF_INET6, SOCK_STREAM, 0);
    report("ipv6-connect-undeclared", connect(t6b, (struct sockaddr *)&doc, sizeof doc));

    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in remote = v4(upstream, port);
    report("tcp-connect-denied-binary", connect(socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&remote, sizeof remote));
    struct sockaddr_in host_loopback = v4("127.0.0.1", port);
    report("tcp-connect-host-loopback", connect(socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&host_loopback,
                                                sizeof host_loopback));
    int nb = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    report("tcp-nonblocking-connect", connect(nb, (struct sockaddr *)&remote, sizeof remote));
    report("tcp-sendto-with-address", sendto(tcp, "x", 1, 0, (struct sockaddr *)&remote, sizeof remote));
    report("tcp-msg-fastopen", sendto(tcp, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&remote, sizeof remote));
    struct sockaddr_in any = v4("0.0.0.0", 8080);
    report("bind-wildcard", bind(tcp, (struct sockaddr *)&any, sizeof any));

    struct { unsigned int a[30]; } params = {0};
    report("io-uring-setup", syscall(425, 8, &params));
    report("unshare-user-namespace", syscall(SYS_unshare, 0x10000000));
    report("clone3", syscall(435, NULL, 0));

    /* netlink: add an address to lo; the kernel refuses a process without CAP_NET_ADMIN. */
    int nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    struct { struct nlmsghdr h; struct ifaddrmsg i; struct rtattr r; unsigned int addr; } req = {0};
    req.h.nlmsg_len = sizeof req; req.h.nlmsg_type = RTM_NEWADDR;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE;
    req.i.ifa_family = AF_INET; req.i.ifa_prefixlen = 8; req.i.ifa_index = 1;
    req.r.rta_type = IFA_LOCAL; req.r.rta_len = RTA_LENGTH(4); inet_pton(AF_INET, "10.9.9.9", &req.addr);
    if (send(nl, &req, sizeof req, 0) < 0) {
        report("netlink-add-address", -1);
    } else {
        char buf[256];
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA((struct nlmsghdr *)buf);
        if (n > 0 && e->error < 0) { errno = -e->error; report("netlink-add-address", -1); }
        else report("netlink-add-address", 0);
    }

    report("ptrace-runtime", ptrace(PTRACE_ATTACH, runtime, 0, 0));
    snprintf(path, sizeof path, "/proc/%d/mem", runtime);
    report("open-runtime-memory", open(path, O_RDONLY));
    char byte;
    struct iovec local = {.iov_base = &byte, .iov_len = 1}, far = {.iov_base = (void *)0x400000, .iov_len = 1};
    report("process-vm-readv-runtime", process_vm_readv(runtime, &local, 1, &far, 1, 0));
    snprintf(path, sizeof path, "/proc/%d/root/etc/hostname", runtime);
    report("runtime-root", open(path, O_RDONLY));
    snprintf(path, sizeof path, "/proc/%d/environ", runtime);
    report("runtime-environ", open(path, O_RDONLY));
    report("proc-1-root", open("/proc/1/root/etc/hostname", O_RDONLY));
    snprintf(path, sizeof path, "/proc/%d/fd/0", runtime);
    report("runtime-fd", open(path, O_RDONLY));
    report("kill-runtime", kill(runtime, SIGKILL));
    report("pidfd-getfd-runtime", syscall(SYS_pidfd_getfd, (int)syscall(SYS_pidfd_open, runtime, 0), 0, 0));
    report("chroot", chroot("/"));
    report("setuid-root", setuid(0));
    report("mount-proc", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL));

    /* An abstract Unix socket a host process listens on: a name in the host's network namespace. */
    struct sockaddr_un au = {.sun_family = AF_UNIX};
    size_t an = strnlen(argv[4], sizeof au.sun_path - 1);
    memcpy(au.sun_path + 1, argv[4], an);
    report("host-abstract-socket", connect(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&au,
                                           offsetof(struct sockaddr_un, sun_path) + 1 + an));

    /* A host System V shared-memory segment, mode 0666, by its key and by its id. */
    report("host-shm-by-key", shmget((key_t)strtoul(argv[6], NULL, 0), 0, 0));
    report("host-shm-by-id", shmat(atoi(argv[5]), NULL, SHM_RDONLY) == (void *)-1 ? -1 : 0);

    /* Where container escapes start: kernel surfaces an agent has no business reaching. */
    unsigned int bpf_attr[32] = {1 /* BPF_PROG_TYPE_SOCKET_FILTER, no instructions */};
    report("bpf-prog-load", syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, bpf_attr, sizeof bpf_attr));
    unsigned int perf_attr[32] = {0 /* PERF_TYPE_HARDWARE */, sizeof perf_attr};
    report("perf-event-open", syscall(SYS_perf_event_open, perf_attr, 0, -1, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
    struct { unsigned int bytes; int type; unsigned char f[8]; } handle = {.bytes = 8, .type = 1};
    report("open-by-handle-at", syscall(SYS_open_by_handle_at, AT_FDCWD, &handle, O_RDONLY));
    report("mknod-char-device", mknod("openshell-mem", S_IFCHR | 0600, makedev(1, 1)));
    report("keyctl-join-session", syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, "openshell"));
    report("add-key", syscall(SYS_add_key, "user", "openshell", "x", 1, -3 /* KEY_SPEC_SESSION_KEYRING */));

    /* vfork: the child connects while the parent is suspended; it is mediated (and denied) too. */
    pid_t child = vfork();
    if (child == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in d = v4(upstream, port);
        _exit(connect(s, (struct sockaddr *)&d, sizeof d) < 0 ? errno : 0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("vfork-child-connect %s\n", WEXITSTATUS(status) ? strerrorname_np(WEXITSTATUS(status)) : "SUCCEEDED");

    /* A foreign ABI: int 0x80 (i386 getpid) kills the process; seen from its parent. */
    child = fork();
    if (child == 0) {
        int r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20));
        _exit(0);
    }
    waitpid(child, &status, 0);
    printf("i386-syscall %s\n", WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : "SURVIVED");
    return 0;
}
