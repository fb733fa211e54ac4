/*
 * The kernel's own seccomp user-notification round trip, measured with a minimal C supervisor:
 * the yardstick the Java handler is compared with. One thread makes socket() calls that the
 * filter notifies, another answers each with EACCES. Prints one JSON object.
 * Usage: notify_baseline <iterations> <sync-wake-up 0|1>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

static int listener;

static void *serve(void *unused) {
    (void) unused;
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
            if (errno == EINTR || errno == ENOENT) continue;
            return NULL;
        }
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.error = -EACCES;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    long long x = *(const long long *) a, y = *(const long long *) b;
    return (x > y) - (x < y);
}

static void measure(const char *name, int type, int n, int warmup, long long *samples, int last) {
    for (int i = 0; i < warmup + n; i++) {
        long long t0 = now_ns();
        syscall(SYS_socket, AF_INET, type, 0);
        long long t1 = now_ns();
        if (i >= warmup) samples[i - warmup] = t1 - t0;
    }
    qsort(samples, n, sizeof *samples, by_value);
    printf("\"%s\":{\"p50_ns\":%lld,\"p90_ns\":%lld,\"p99_ns\":%lld}%s", name, samples[n / 2], samples[n * 9 / 10],
           samples[n * 99 / 100], last ? "" : ",");
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int sync = argc > 2 ? atoi(argv[2]) : 0;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_RAW, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    /* Jump fix-up: a socket that is not raw falls to USER_NOTIF; anything else to ALLOW. */
    code[1].jf = 4;
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) {
        perror("seccomp");
        return 1;
    }
    if (sync && ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) != 0) {
        perror("SET_FLAGS");
        return 1;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, serve, NULL);
    long long *samples = malloc(sizeof *samples * n);
    printf("{");
    measure("filter_errno", SOCK_RAW, n, n / 4, samples, 0);
    measure("notify_round_trip", SOCK_DGRAM, n, n / 4, samples, 1);
    printf("}\n");
    return 0;
}
