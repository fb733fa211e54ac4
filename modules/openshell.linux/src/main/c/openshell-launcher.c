/*
 * openshell-launcher: the workload launcher (the parent's side is openshell.linux.LauncherProcess).
 *
 * Why native: a workload process must have its restrictions (uid, capabilities, no_new_privs,
 * Landlock, the seccomp filter with its user-notification listener) applied by itself, on the one
 * thread that then calls execve. A JVM cannot fork safely, so the launcher used to be a JVM of its
 * own per workload process: 0.35-0.45 s of CPU and 42 MiB resident before the target ran. This
 * program does the same steps in the same order, with the same wire protocol, in about a
 * millisecond. It is linked statically: it depends on nothing from the workload's file system.
 *
 * Protocol on the inherited SOCK_SEQPACKET socket PLAN_FD (big-endian, one message each):
 *   parent -> 'P' u32 abi, u64 handled_fs, u64 scopes, then the LaunchPlan wire form
 *             (the Landlock rights the parent chose for this kernel; 0 and 0: no Landlock)
 *   us     -> 'R' u8 wait_killable, u8 landlock_enforced, with the listener as SCM_RIGHTS
 *             or 'F' u32 step, u32 errno, detail (at most MAX_DETAIL bytes)
 *   parent -> 'A' (or closes the socket: withdrawn, we exit FAILURE_EXIT)
 *   us     -> end of stream when execve succeeded (the socket is close-on-exec), or 'F'
 *
 * The steps (LaunchStep's order): PLAN, NAMESPACES, TERMINAL, RLIMITS, CAPABILITY_BOUNDING_SET,
 * IDENTITY, CAPABILITIES, NO_NEW_PRIVS, WORKING_DIRECTORY, LANDLOCK, SECCOMP, LISTENER_HANDOFF,
 * ACKNOWLEDGEMENT, EXEC. Any failure is reported with its step and errno and the target never runs.
 *
 * The listener is sent by a courier thread started before the filter: the filter notifies
 * sendmsg, and nobody could answer that notification before the parent holds the listener.
 * Everything else runs on the main thread, which is the only thread until then, so the identity
 * changes are plain system calls that apply to it alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Must match LauncherProcess and the plan's bounds (NativeLauncherTest checks them against this file). */
#define PLAN_FD 3
#define PLAN_WAIT_MS (10 * 60 * 1000)
#define ACK_WAIT_MS (60 * 1000)
#define FAILURE_EXIT 127
#define MAX_PLAN_BYTES (128 * 1024)
#define PLAN_HEADER_BYTES (1 + 4 + 8 + 8) /* 'P', abi, handled_fs, scopes */
#define MAX_GROUPS 65536
#define MAX_LANDLOCK_PATHS 256
#define MAX_RLIMITS 16
#define MAX_INSTRUCTIONS 4096
#define MAX_DETAIL 4000
#define PLAN_MAGIC 0x4f534c31u

enum step {
    PLAN, NAMESPACES, TERMINAL, RLIMITS, CAPABILITY_BOUNDING_SET, IDENTITY, CAPABILITIES, NO_NEW_PRIVS,
    WORKING_DIRECTORY, LANDLOCK, SECCOMP, LISTENER_HANDOFF, ACKNOWLEDGEMENT, EXEC
};

/* NamespaceType's order, with its /proc/self/ns names and clone flags. */
static const char *const NS_NAMES[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
static const int NS_FLAGS[] = {0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000};
#define NS_COUNT 7
enum { NS_USER = 0, NS_MOUNT = 1, NS_PID = 2 };

/* Landlock rights as openshell.linux.Landlock names them. */
#define LL_EXECUTE 1ull
#define LL_WRITE_FILE (1ull << 1)
#define LL_READ_FILE (1ull << 2)
#define LL_READ_DIR (1ull << 3)
#define LL_TRUNCATE (1ull << 14)
#define LL_IOCTL_DEV (1ull << 15)
#define LL_FILE_RIGHTS (LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV)
#define LL_READ_ONLY (LL_EXECUTE | LL_READ_FILE | LL_READ_DIR)

#define SECCOMP_FLAG_NEW_LISTENER (1u << 3)
#define SECCOMP_FLAG_WAIT_KILLABLE_RECV (1u << 5)

/* ---- failure reports ---- */

static int plan_socket = PLAN_FD;

/*
 * Reports a failed step and exits. send(2) without an address, not sendmsg: the filter lets it
 * through, while sendmsg would wait for a listener nobody reads. MSG_NOSIGNAL: a parent already
 * gone must not turn the exit status into SIGPIPE.
 */
__attribute__((noreturn, format(printf, 3, 4)))
static void fail(enum step step, int err, const char *format, ...) {
    unsigned char message[9 + MAX_DETAIL];
    char detail[MAX_DETAIL + 1];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    if (n < 0) {
        n = 0;
    }
    if (n > MAX_DETAIL) {
        n = MAX_DETAIL;
    }
    message[0] = 'F';
    uint32_t s = (uint32_t) step, e = (uint32_t) err;
    for (int i = 0; i < 4; i++) {
        message[1 + i] = (unsigned char) (s >> (24 - 8 * i));
        message[5 + i] = (unsigned char) (e >> (24 - 8 * i));
    }
    memcpy(message + 9, detail, (size_t) n);
    (void) !send(plan_socket, message, 9 + (size_t) n, MSG_NOSIGNAL);
    _exit(FAILURE_EXIT);
}

/* ---- reading the plan ---- */

struct reader {
    const unsigned char *data;
    size_t length;
    size_t at;
};

static uint32_t read_u32(struct reader *r) {
    if (r->length - r->at < 4) {
        fail(PLAN, EINVAL, "launch plan decode: truncated");
    }
    const unsigned char *p = r->data + r->at;
    r->at += 4;
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static uint64_t read_u64(struct reader *r) {
    uint64_t high = read_u32(r);
    return high << 32 | read_u32(r);
}

static uint32_t read_count(struct reader *r, uint32_t max) {
    uint32_t n = read_u32(r);
    if (n > max) {
        fail(PLAN, EINVAL, "launch plan decode: count %u outside 0..%u", n, max);
    }
    return n;
}

/* A NUL-terminated copy of the next string (no NUL inside), from one allocation per plan. */
static char *arena;
static size_t arena_used, arena_size;

static char *read_string(struct reader *r) {
    uint32_t n = read_count(r, MAX_PLAN_BYTES);
    if (r->length - r->at < n) {
        fail(PLAN, EINVAL, "launch plan decode: truncated");
    }
    if (memchr(r->data + r->at, 0, n) != NULL) {
        fail(PLAN, EINVAL, "launch plan decode: string contains NUL");
    }
    if (arena_size - arena_used < (size_t) n + 1) {
        fail(PLAN, ENOMEM, "launch plan decode: strings larger than the plan");
    }
    char *s = arena + arena_used;
    memcpy(s, r->data + r->at, n);
    s[n] = 0;
    arena_used += (size_t) n + 1;
    r->at += n;
    return s;
}

/* A NULL-terminated array of the next list of strings. */
static char **read_strings(struct reader *r, uint32_t *count) {
    uint32_t n = read_count(r, MAX_PLAN_BYTES / 4);
    char **values = calloc((size_t) n + 1, sizeof *values);
    if (values == NULL) {
        fail(PLAN, ENOMEM, "launch plan decode: %u strings", n);
    }
    for (uint32_t i = 0; i < n; i++) {
        values[i] = read_string(r);
    }
    if (count != NULL) {
        *count = n;
    }
    return values;
}

struct plan {
    uint32_t abi;
    uint64_t handled_fs;
    uint64_t scopes;
    char *executable;
    char **argv;
    char **envp;
    char *cwd;
    uint32_t uid, gid;
    uint32_t group_count;
    gid_t *groups;
    uint32_t ns_count;
    int ns_types[NS_COUNT];
    char *ns_paths[NS_COUNT];
    uint32_t landlock_required;
    uint32_t read_only_count, read_write_count;
    char **read_only;
    char **read_write;
    uint32_t rlimit_count;
    int rlimit_resource[MAX_RLIMITS];
    struct rlimit rlimit_value[MAX_RLIMITS];
    int terminal;
    struct sock_fprog filter;
};

static void require_absolute(const char *path, const char *what) {
    if (path[0] != '/') {
        fail(PLAN, EINVAL, "launch plan: %s must be an absolute path: %s", what, path);
    }
}

static void decode(const unsigned char *data, size_t length, struct plan *plan) {
    struct reader r = {data, length, 0};
    arena_size = length + 1;
    arena_used = 0;
    arena = malloc(arena_size);
    if (arena == NULL) {
        fail(PLAN, ENOMEM, "launch plan decode: %zu bytes", length);
    }
    plan->abi = read_u32(&r);
    plan->handled_fs = read_u64(&r);
    plan->scopes = read_u64(&r);
    if (read_u32(&r) != PLAN_MAGIC) {
        fail(PLAN, EINVAL, "launch plan decode: bad magic");
    }
    plan->executable = read_string(&r);
    require_absolute(plan->executable, "executable");
    uint32_t argc;
    plan->argv = read_strings(&r, &argc);
    if (argc == 0) {
        fail(PLAN, EINVAL, "launch plan: argv must contain argv[0]");
    }
    plan->envp = read_strings(&r, NULL);
    plan->cwd = read_string(&r);
    require_absolute(plan->cwd, "working directory");
    plan->uid = read_u32(&r);
    plan->gid = read_u32(&r);
    plan->group_count = read_count(&r, MAX_GROUPS);
    plan->groups = calloc((size_t) plan->group_count + 1, sizeof *plan->groups);
    if (plan->groups == NULL) {
        fail(PLAN, ENOMEM, "launch plan decode: %u groups", plan->group_count);
    }
    for (uint32_t i = 0; i < plan->group_count; i++) {
        plan->groups[i] = (gid_t) read_u32(&r);
    }
    plan->ns_count = read_count(&r, NS_COUNT);
    for (uint32_t i = 0; i < plan->ns_count; i++) {
        uint32_t type = read_u32(&r);
        if (type >= NS_COUNT) {
            fail(PLAN, EINVAL, "launch plan decode: index %u", type);
        }
        plan->ns_types[i] = (int) type;
        plan->ns_paths[i] = read_string(&r);
    }
    uint32_t mode = read_u32(&r);
    if (mode > 1) {
        fail(PLAN, EINVAL, "launch plan decode: index %u", mode);
    }
    plan->landlock_required = mode == 0;
    plan->read_only = read_strings(&r, &plan->read_only_count);
    plan->read_write = read_strings(&r, &plan->read_write_count);
    if (plan->read_only_count + plan->read_write_count > MAX_LANDLOCK_PATHS) {
        fail(PLAN, EINVAL, "launch plan: more than %d Landlock paths", MAX_LANDLOCK_PATHS);
    }
    plan->rlimit_count = read_count(&r, MAX_RLIMITS);
    for (uint32_t i = 0; i < plan->rlimit_count; i++) {
        plan->rlimit_resource[i] = (int) read_u32(&r);
        plan->rlimit_value[i].rlim_cur = read_u64(&r);
        plan->rlimit_value[i].rlim_max = read_u64(&r);
    }
    if (r.length - r.at < 1) {
        fail(PLAN, EINVAL, "launch plan decode: truncated");
    }
    plan->terminal = r.data[r.at++] != 0;
    uint32_t program = read_count(&r, MAX_INSTRUCTIONS * 8);
    if (program == 0 || program % 8 != 0 || r.length - r.at != program) {
        fail(PLAN, EINVAL, "launch plan decode: filter of %u bytes with %zu left", program, r.length - r.at);
    }
    plan->filter.len = (unsigned short) (program / 8);
    plan->filter.filter = malloc(program);
    if (plan->filter.filter == NULL) {
        fail(PLAN, ENOMEM, "launch plan decode: filter");
    }
    memcpy(plan->filter.filter, r.data + r.at, program);
    if (plan->landlock_required && plan->handled_fs == 0) {
        fail(PLAN, EINVAL, "launch plan: Landlock is required but the parent chose no rights");
    }
}

/* Waits up to ms for fd to be readable; 0 on timeout. */
static int await_readable(int fd, int ms, enum step step) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long spent = (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (spent >= ms) {
            return 0;
        }
        int n = poll(&p, 1, (int) (ms - spent));
        if (n > 0) {
            return 1;
        }
        if (n < 0 && errno != EINTR) {
            fail(step, errno, "poll(plan socket)");
        }
    }
}

static unsigned char *receive_plan(size_t *length) {
    size_t capacity = PLAN_HEADER_BYTES + MAX_PLAN_BYTES;
    unsigned char *message = malloc(capacity);
    if (message == NULL) {
        fail(PLAN, ENOMEM, "plan buffer");
    }
    if (!await_readable(plan_socket, PLAN_WAIT_MS, PLAN)) {
        _exit(FAILURE_EXIT);
    }
    ssize_t n;
    do {
        /* MSG_TRUNC: the real length of a longer message. Descriptors sent along are not taken. */
        n = recv(plan_socket, message, capacity, MSG_TRUNC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        fail(PLAN, errno, "recv(plan)");
    }
    if (n == 0) {
        _exit(FAILURE_EXIT); /* the parent closed the socket: nothing to launch */
    }
    if ((size_t) n > capacity) {
        fail(PLAN, EMSGSIZE, "launch plan decode: %zd bytes (at most %d)", n - PLAN_HEADER_BYTES, MAX_PLAN_BYTES);
    }
    if (message[0] != 'P') {
        fail(PLAN, EINVAL, "launcher plan: expected a plan message");
    }
    *length = (size_t) n - 1;
    return message + 1;
}

/* ---- the steps ---- */

static void join_namespaces(const struct plan *plan) {
    for (uint32_t i = 0; i < plan->ns_count; i++) {
        int type = plan->ns_types[i];
        const char *path = plan->ns_paths[i];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fail(NAMESPACES, errno, "open(%s)", path);
        }
        if (type == NS_USER || type == NS_MOUNT || type == NS_PID) {
            /* The launcher must be started inside these: the parent's design (one user namespace
             * per sandbox, entered by the runtime itself) never asks for more, and a pid namespace
             * would only apply to children. */
            char own[64];
            struct stat target, current;
            snprintf(own, sizeof own, "/proc/self/ns/%s", NS_NAMES[type]);
            if (fstat(fd, &target) != 0 || stat(own, &current) != 0) {
                fail(NAMESPACES, errno, "stat(%s)", path);
            }
            if (target.st_ino != current.st_ino || target.st_dev != current.st_dev) {
                fail(NAMESPACES, EINVAL, "setns(%s): the launcher does not enter a %s namespace; start it inside it",
                        NS_NAMES[type], NS_NAMES[type]);
            }
        } else if (setns(fd, NS_FLAGS[type]) != 0) {
            fail(NAMESPACES, errno, "setns(%s)", NS_NAMES[type]);
        }
        close(fd);
    }
}

/* The highest capability number: PR_CAPBSET_READ is EINVAL past it. */
static int last_capability(void) {
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL && cap > 0) {
                return cap - 1;
            }
            fail(CAPABILITY_BOUNDING_SET, errno, "prctl(PR_CAPBSET_READ, %d)", cap);
        }
    }
    return 63;
}

static void drop_bounding_and_ambient(int last) {
    for (int cap = 0; cap <= last; cap++) {
        /* A capability already outside the set needs no drop (and without CAP_SETPCAP, as in a
           container started with cap_drop ALL, the drop itself would be refused). */
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0) {
            continue;
        }
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
            fail(CAPABILITY_BOUNDING_SET, errno, "prctl(PR_CAPBSET_DROP, %d)", cap);
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
        fail(CAPABILITY_BOUNDING_SET, errno, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    }
}

/* Whether this thread's supplementary groups are exactly the plan's (in any order). */
static int has_groups(const struct plan *plan) {
    static gid_t current[MAX_GROUPS];
    long count = syscall(SYS_getgroups, MAX_GROUPS, current);
    if (count < 0 || (size_t) count != (size_t) plan->group_count) {
        return 0;
    }
    for (long i = 0; i < count; i++) {
        int found = 0;
        for (long j = 0; j < count && !found; j++) {
            found = current[i] == plan->groups[j];
        }
        if (!found) {
            return 0;
        }
    }
    return 1;
}

static void take_identity(const struct plan *plan) {
    /* Raw system calls: only this thread exists, and glibc's wrappers would signal others.
       setgroups needs CAP_SETGID even to set the groups a process already has: a process without
       it (a container's non-root user) may keep its groups when they are the plan's, never others. */
    if (syscall(SYS_setgroups, (size_t) plan->group_count, plan->groups) != 0
            && !(errno == EPERM && has_groups(plan))) {
        fail(IDENTITY, errno, "setgroups");
    }
    if (syscall(SYS_setresgid, plan->gid, plan->gid, plan->gid) != 0) {
        fail(IDENTITY, errno, "setresgid(%u)", plan->gid);
    }
    if (syscall(SYS_setresuid, plan->uid, plan->uid, plan->uid) != 0) {
        fail(IDENTITY, errno, "setresuid(%u)", plan->uid);
    }
}

static void clear_capabilities(int last) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) {
        fail(CAPABILITIES, errno, "capset");
    }
    memset(data, 0xff, sizeof data);
    if (syscall(SYS_capget, &header, data) != 0) {
        fail(CAPABILITIES, errno, "capget");
    }
    uint64_t bounding = 0, ambient = 0;
    int sets = 0;
    for (int cap = 0; cap <= last; cap++) {
        int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        int amb = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
        if (in < 0 || amb < 0) {
            fail(CAPABILITIES, errno, "prctl(read capability %d)", cap);
        }
        bounding |= (uint64_t) (in == 1) << cap;
        ambient |= (uint64_t) (amb == 1) << cap;
    }
    for (int i = 0; i < 2; i++) {
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            sets = 1;
        }
    }
    if (sets || bounding != 0 || ambient != 0) {
        fail(CAPABILITIES, EPERM, "capabilities remain: effective %x%08x permitted %x%08x inheritable %x%08x "
                "bounding %llx ambient %llx", data[1].effective, data[0].effective, data[1].permitted,
                data[0].permitted, data[1].inheritable, data[0].inheritable,
                (unsigned long long) bounding, (unsigned long long) ambient);
    }
}

static void no_new_privs(void) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        fail(NO_NEW_PRIVS, errno, "prctl(PR_SET_NO_NEW_PRIVS)");
    }
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
        fail(NO_NEW_PRIVS, EPERM, "prctl(PR_GET_NO_NEW_PRIVS): no_new_privs did not stick");
    }
}

static void allow_path(int ruleset, const char *path, uint64_t allowed) {
    if (path[0] != '/') {
        fail(LANDLOCK, EINVAL, "launch plan: Landlock path must be an absolute path: %s", path);
    }
    int parent = open(path, O_PATH | O_CLOEXEC);
    if (parent < 0) {
        fail(LANDLOCK, errno, "open(O_PATH): %s", path);
    }
    struct stat st;
    if (fstat(parent, &st) != 0) {
        fail(LANDLOCK, errno, "fstat: %s", path);
    }
    /* The kernel refuses directory-only rights on a file. */
    uint64_t rights = S_ISDIR(st.st_mode) ? allowed : allowed & LL_FILE_RIGHTS;
    if (rights != 0) {
        struct landlock_path_beneath_attr attr = {.allowed_access = rights, .parent_fd = parent};
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0) {
            fail(LANDLOCK, errno, "landlock_add_rule(%s)", path);
        }
    }
    close(parent);
}

/* @return whether a Landlock domain is now in force */
static int apply_landlock(const struct plan *plan) {
    if (plan->handled_fs == 0 && plan->scopes == 0) {
        return 0;
    }
    struct {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
    } attr = {plan->handled_fs, 0, plan->scopes};
    size_t size = plan->scopes != 0 ? 24 : 8;
    int ruleset = (int) syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) {
        fail(LANDLOCK, errno, "landlock_create_ruleset (ABI %u)", plan->abi);
    }
    for (uint32_t i = 0; i < plan->read_only_count; i++) {
        allow_path(ruleset, plan->read_only[i], LL_READ_ONLY & plan->handled_fs);
    }
    for (uint32_t i = 0; i < plan->read_write_count; i++) {
        allow_path(ruleset, plan->read_write[i], plan->handled_fs);
    }
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
        fail(LANDLOCK, errno, "landlock_restrict_self");
    }
    close(ruleset);
    return 1;
}

/* ---- the courier: the one thread without the filter ---- */

static int courier_in[2], courier_out[2];
static unsigned char ready_message[3];

static void *courier(void *unused) {
    (void) unused;
    int listener;
    if (read(courier_in[0], &listener, sizeof listener) != sizeof listener) {
        return NULL;
    }
    char control[CMSG_SPACE(sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {.iov_base = ready_message, .iov_len = sizeof ready_message};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &listener, sizeof(int));
    ssize_t n;
    do {
        n = sendmsg(plan_socket, &message, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    int result = n == (ssize_t) sizeof ready_message ? 0 : n < 0 ? errno : EPIPE;
    (void) !write(courier_out[1], &result, sizeof result);
    return NULL;
}

static void start_courier(void) {
    if (pipe2(courier_in, O_CLOEXEC) != 0 || pipe2(courier_out, O_CLOEXEC) != 0) {
        fail(SECCOMP, errno, "pipe2 (listener courier)");
    }
    pthread_t thread;
    int err = pthread_create(&thread, NULL, courier, NULL);
    if (err != 0) {
        fail(SECCOMP, err, "pthread_create (listener courier)");
    }
    pthread_detach(thread);
}

static void hand_off(int listener, int wait_killable, int landlock) {
    ready_message[0] = 'R';
    ready_message[1] = (unsigned char) wait_killable;
    ready_message[2] = (unsigned char) landlock;
    if (write(courier_in[1], &listener, sizeof listener) != sizeof listener) {
        fail(LISTENER_HANDOFF, errno, "listener hand-off: courier gone");
    }
    if (!await_readable(courier_out[0], ACK_WAIT_MS, LISTENER_HANDOFF)) {
        fail(LISTENER_HANDOFF, ETIMEDOUT, "listener hand-off: sendmsg did not complete");
    }
    int result;
    if (read(courier_out[0], &result, sizeof result) != sizeof result) {
        fail(LISTENER_HANDOFF, EIO, "listener hand-off: no result");
    }
    if (result != 0) {
        fail(LISTENER_HANDOFF, result, "sendmsg(listener)");
    }
    close(listener);
}

static void await_acknowledgement(void) {
    if (!await_readable(plan_socket, ACK_WAIT_MS, ACKNOWLEDGEMENT)) {
        fail(ACKNOWLEDGEMENT, ECANCELED, "launcher acknowledgement: no acknowledgement within PT1M");
    }
    unsigned char ack[16];
    ssize_t n;
    do {
        n = recv(plan_socket, ack, sizeof ack, 0);
    } while (n < 0 && errno == EINTR);
    if (n != 1 || ack[0] != 'A') {
        fail(ACKNOWLEDGEMENT, ECANCELED, "launcher acknowledgement: parent withdrew");
    }
}

int main(void) {
    if (fcntl(plan_socket, F_SETFD, FD_CLOEXEC) != 0) {
        /* No socket to report on: the parent sees the exit. */
        return FAILURE_EXIT;
    }
    size_t length;
    const unsigned char *received = receive_plan(&length);
    struct plan plan;
    memset(&plan, 0, sizeof plan);
    decode(received, length, &plan);

    join_namespaces(&plan);
    if (plan.terminal && ioctl(0, TIOCSCTTY, 0) != 0) {
        fail(TERMINAL, errno, "ioctl(TIOCSCTTY)");
    }
    for (uint32_t i = 0; i < plan.rlimit_count; i++) {
        if (prlimit(0, plan.rlimit_resource[i], &plan.rlimit_value[i], NULL) != 0) {
            fail(RLIMITS, errno, "prlimit(set)");
        }
    }
    int last = last_capability();
    drop_bounding_and_ambient(last);
    take_identity(&plan);
    clear_capabilities(last);
    no_new_privs();
    if (chdir(plan.cwd) != 0) {
        fail(WORKING_DIRECTORY, errno, "chdir(%s)", plan.cwd);
    }
    int landlock = apply_landlock(&plan);

    start_courier();
    int wait_killable = 1;
    long listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
            SECCOMP_FLAG_NEW_LISTENER | SECCOMP_FLAG_WAIT_KILLABLE_RECV, &plan.filter);
    if (listener < 0 && errno == EINVAL) {
        /* Kernels before 5.19 reject the flag; a bad program fails again here. */
        wait_killable = 0;
        listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FLAG_NEW_LISTENER, &plan.filter);
    }
    if (listener < 0) {
        fail(SECCOMP, errno, "seccomp(SET_MODE_FILTER, NEW_LISTENER)");
    }
    hand_off((int) listener, wait_killable, landlock);
    await_acknowledgement();

    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
    /* Everything but stdio closes at exec: the plan socket's end of stream tells the parent exec succeeded. */
    if (syscall(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */) != 0) {
        fail(EXEC, errno, "close_range");
    }
    execve(plan.executable, plan.argv, plan.envp);
    fail(EXEC, errno, "execve(%s)", plan.executable);
}
