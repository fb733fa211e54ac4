/*
 * osperf: the one client (and the host-side server) of the sandbox benchmark. The same file runs
 * directly on the host and inside a sandbox, so the only difference between the two measurements
 * is the mediation path. Every client mode prints one "ready" line after its warm-up, then one
 * "result" line of JSON with every timed sample in nanoseconds; every blocking call has a timeout
 * and the whole process has an alarm, so a broken setup ends with an error line, never a hang.
 *
 *   osperf serve ADDR                                   echo, sink and a second echo listener (the
 *                                                       benchmark's policy leaves that one out); prints ready
 *   osperf connect HOST PORT OPS CONC WARMUP [START_FILE]
 *                                                       connect, 1-byte echo, close per op
 *   osperf rr HOST PORT OPS SIZE WARMUP                 SIZE-byte request/response, one connection
 *   osperf stream HOST PORT BYTES CONNS [START_FILE]    bulk send to the sink, acknowledged at end; after a
 *                                                       warm-up, STREAM_TIMED timed transfers of BYTES
 *   osperf dns SERVER NAME OPS WARMUP                   A queries over UDP; a lost warm-up query is asked
 *                                                       again (at most DNS_WARMUP_LOSSES), a lost timed one
 *                                                       is an error, timed at DNS_TIMEOUT_S
 *   osperf hold HOST PORT N RELEASE_FILE MAX_S          open N connections, hold until the file exists
 *   osperf rate HOST PORT DENY_PORT RATE SECONDS THREADS [START_FILE]
 *                                                       paced connect/echo/close; every 10th to DENY_PORT;
 *                                                       after ready, waits (up to START_WAIT_S) for START_FILE;
 *                                                       stops starting connects after SECONDS, however few it
 *                                                       managed, and waits at most RATE_DRAIN_S for the rest;
 *                                                       prints a "rate" line (the tally) before "result"
 *
 * connect and stream with a START_FILE wait (up to START_WAIT_S) for it before their warm-up: a
 * sandbox's agent starts while the sandbox's own processes are still starting, and the harness
 * creates the file once they have settled, so the timing measures the mediation, not the start-up.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Longest any client run may take before it gives up (seconds). */
#define RUN_DEADLINE_S 600
/* Send and receive timeout of every socket (seconds). */
#define IO_TIMEOUT_S 30
/* Largest concurrency of connect and rate modes. */
#define MAX_THREADS 64
/* Rate mode: longest wait for connects still in flight when the time is up (seconds). */
#define RATE_DRAIN_S 5
/* Longest wait for a start file (seconds). */
#define START_WAIT_S 300
/* Wait for one DNS answer before counting the query as lost (seconds). */
#define DNS_TIMEOUT_S 1
/* DNS mode: most warm-up queries that may go unanswered (each asked again) before the resolver counts as broken. */
#define DNS_WARMUP_LOSSES 10
#define CHUNK (64 * 1024)
/* Stream mode: timed transfers of BYTES per run (each on fresh connections); one of ~0.1 s varies too much alone. */
#define STREAM_TIMED 4

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long) t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what) {
    printf("{\"error\":\"%s: %s\"}\n", what, strerror(errno));
    fflush(stdout);
    exit(1);
}

static void on_alarm(int sig) {
    (void) sig;
    static const char msg[] = "{\"error\":\"deadline: the run took longer than its bound\"}\n";
    (void) !write(1, msg, sizeof msg - 1);
    _exit(3);
}

static struct sockaddr_in target(const char *host, int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    /* addresses only: a static binary cannot use the resolver, and names would time DNS too */
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        printf("{\"error\":\"not an IPv4 address: %s\"}\n", host);
        exit(1);
    }
    return a;
}

static void timeouts(int fd) {
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Returns a connected socket, or -errno. */
static int dial(const struct sockaddr_in *a) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    timeouts(fd);
    if (connect(fd, (const struct sockaddr *) a, sizeof *a) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int full_write(int fd, const char *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) {
                continue;
            }
            return -1;
        }
        b += w;
        n -= (size_t) w;
    }
    return 0;
}

static int full_read(int fd, char *b, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) {
                continue;
            }
            return -1;
        }
        b += r;
        n -= (size_t) r;
    }
    return 0;
}

static void print_samples(const char *mode, long long *s, long n, long long elapsed, long errors, double bytes) {
    printf("{\"result\":\"%s\",\"ops\":%ld,\"errors\":%ld,\"elapsed_ns\":%lld,\"bytes\":%.0f,\"samples_ns\":[", mode, n,
           errors, elapsed, bytes);
    for (long i = 0; i < n; i++) {
        printf(i ? ",%lld" : "%lld", s[i]);
    }
    printf("]}\n");
    fflush(stdout);
}

static void ready(const char *mode) {
    printf("{\"ready\":\"%s\"}\n", mode);
    fflush(stdout);
}

/* Waits for the start file, if any; 0 once it exists, 1 (after an error line) if it did not appear in time. */
static int await_start(const char *start) {
    if (!start) {
        return 0;
    }
    struct stat st;
    long long until = now_ns() + START_WAIT_S * 1000000000LL;
    while (stat(start, &st) != 0) {
        if (now_ns() >= until) {
            printf("{\"error\":\"start file %s did not appear within %d s\"}\n", start, START_WAIT_S);
            return 1;
        }
        usleep(20000);
    }
    return 0;
}

/* ---- server ---- */

enum kind { ECHO_LISTENER, SINK_LISTENER, ECHO, SINK };
struct conn {
    int fd;
    enum kind kind;
    long long want; /* sink: bytes announced, -1 until the 8-byte header arrived */
    long long got;
    int header_got;
    unsigned char header[8];
};

static int listener(const char *addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = target(addr, 0);
    if (bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, 4096) != 0) {
        die("bind");
    }
    return fd;
}

static int port_of(int fd) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *) &a, &l);
    return ntohs(a.sin_port);
}

static int serve(const char *addr) {
    signal(SIGPIPE, SIG_IGN);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int echo = listener(addr), sink = listener(addr), denied = listener(addr);
    struct conn *le = calloc(1, sizeof *le), *ls = calloc(1, sizeof *ls), *ld = calloc(1, sizeof *ld);
    le->fd = echo;
    le->kind = ECHO_LISTENER;
    ls->fd = sink;
    ls->kind = SINK_LISTENER;
    ld->fd = denied;
    ld->kind = ECHO_LISTENER;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.ptr = le;
    epoll_ctl(ep, EPOLL_CTL_ADD, echo, &ev);
    ev.data.ptr = ls;
    epoll_ctl(ep, EPOLL_CTL_ADD, sink, &ev);
    ev.data.ptr = ld;
    epoll_ctl(ep, EPOLL_CTL_ADD, denied, &ev);
    printf("{\"ready\":\"serve\",\"address\":\"%s\",\"echo\":%d,\"sink\":%d,\"denied\":%d}\n", addr, port_of(echo),
           port_of(sink), port_of(denied));
    fflush(stdout);
    static char buf[CHUNK];
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->kind == ECHO_LISTENER || c->kind == SINK_LISTENER) {
                int fd;
                while ((fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    nc->kind = c->kind == ECHO_LISTENER ? ECHO : SINK;
                    nc->want = -1;
                    struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP};
                    e.data.ptr = nc;
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            for (;;) {
                ssize_t r = read(c->fd, buf, sizeof buf);
                if (r > 0) {
                    if (c->kind == ECHO) {
                        int fl = fcntl(c->fd, F_GETFL);
                        /* small messages: the socket buffer takes them; block for the rare rest */
                        fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
                        int bad = full_write(c->fd, buf, (size_t) r);
                        fcntl(c->fd, F_SETFL, fl);
                        if (bad) {
                            r = 0;
                        }
                    } else {
                        ssize_t off = 0;
                        while (c->header_got < 8 && off < r) {
                            c->header[c->header_got++] = (unsigned char) buf[off++];
                        }
                        if (c->header_got == 8 && c->want < 0) {
                            c->want = 0;
                            for (int k = 0; k < 8; k++) {
                                c->want = (c->want << 8) | c->header[k];
                            }
                        }
                        c->got += r - off;
                        if (c->want >= 0 && c->got >= c->want) {
                            (void) !write(c->fd, "k", 1);
                            c->got = -(c->want + 1) * 2; /* acknowledged once */
                        }
                    }
                }
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    free(c);
                    break;
                }
                if (r < 0) {
                    break;
                }
            }
        }
    }
    return 0;
}

/* ---- connect ---- */

struct job {
    struct sockaddr_in a;
    long ops;
    long long *samples;
    long errors;
    int first_errno;
};

static int connect_once(const struct sockaddr_in *a) {
    int fd = dial(a);
    if (fd < 0) {
        return fd;
    }
    char b = 'x';
    int bad = full_write(fd, &b, 1) || full_read(fd, &b, 1);
    int e = errno;
    close(fd);
    return bad ? -(e ? e : EIO) : 0;
}

static void *connect_worker(void *p) {
    struct job *j = p;
    for (long i = 0; i < j->ops; i++) {
        long long t = now_ns();
        int r = connect_once(&j->a);
        j->samples[i] = now_ns() - t;
        if (r < 0) {
            if (!j->errors) {
                j->first_errno = -r;
            }
            j->errors++;
        }
    }
    return NULL;
}

static int run_connect(const char *host, int port, long ops, int conc, long warmup, const char *start) {
    struct sockaddr_in a = target(host, port);
    if (await_start(start)) {
        return 1;
    }
    for (long i = 0; i < warmup; i++) {
        int r = connect_once(&a);
        if (r < 0) {
            errno = -r;
            die("warm-up connect");
        }
    }
    ready("connect");
    if (conc < 1 || conc > MAX_THREADS) {
        conc = 1;
    }
    long long *samples = calloc((size_t) ops, sizeof *samples);
    struct job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    long per = ops / conc, off = 0;
    long long t0 = now_ns();
    for (int k = 0; k < conc; k++) {
        jobs[k] = (struct job){.a = a, .ops = k == conc - 1 ? ops - off : per, .samples = samples + off};
        off += jobs[k].ops;
        pthread_create(&th[k], NULL, connect_worker, &jobs[k]);
    }
    long errors = 0;
    int first = 0;
    for (int k = 0; k < conc; k++) {
        pthread_join(th[k], NULL);
        errors += jobs[k].errors;
        if (!first) {
            first = jobs[k].first_errno;
        }
    }
    long long elapsed = now_ns() - t0;
    if (errors) {
        fprintf(stderr, "first error: %s\n", strerror(first));
    }
    print_samples("connect", samples, ops, elapsed, errors, 0);
    return 0;
}

/* ---- rr ---- */

static int run_rr(const char *host, int port, long ops, int size, long warmup) {
    struct sockaddr_in a = target(host, port);
    int fd = dial(&a);
    if (fd < 0) {
        errno = -fd;
        die("connect");
    }
    char *b = calloc(1, (size_t) size);
    for (long i = 0; i < warmup; i++) {
        if (full_write(fd, b, (size_t) size) || full_read(fd, b, (size_t) size)) {
            die("warm-up request");
        }
    }
    ready("rr");
    long long *samples = calloc((size_t) ops, sizeof *samples);
    long long t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        long long t = now_ns();
        if (full_write(fd, b, (size_t) size) || full_read(fd, b, (size_t) size)) {
            die("request");
        }
        samples[i] = now_ns() - t;
    }
    long long elapsed = now_ns() - t0;
    close(fd);
    print_samples("rr", samples, ops, elapsed, 0, (double) ops * size * 2);
    return 0;
}

/* ---- stream ---- */

struct stream_job {
    struct sockaddr_in a;
    long long bytes;
    long long ns;
    int fd;
    int failed;
};

static void *stream_worker(void *p) {
    struct stream_job *j = p;
    static char buf[CHUNK];
    unsigned char h[8];
    for (int k = 0; k < 8; k++) {
        h[k] = (unsigned char) (j->bytes >> (56 - 8 * k));
    }
    long long t = now_ns();
    if (full_write(j->fd, (char *) h, 8)) {
        j->failed = 1;
        return NULL;
    }
    for (long long sent = 0; sent < j->bytes;) {
        size_t n = (size_t) (j->bytes - sent < CHUNK ? j->bytes - sent : CHUNK);
        if (full_write(j->fd, buf, n)) {
            j->failed = 1;
            return NULL;
        }
        sent += (long long) n;
    }
    char ack;
    if (full_read(j->fd, &ack, 1)) {
        j->failed = 1;
    }
    j->ns = now_ns() - t;
    return NULL;
}

static int run_stream(const char *host, int port, long long bytes, int conns, const char *start) {
    struct sockaddr_in a = target(host, port);
    if (await_start(start)) {
        return 1;
    }
    if (conns < 1 || conns > MAX_THREADS) {
        conns = 1;
    }
    struct stream_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    long long samples[MAX_THREADS * STREAM_TIMED];
    long long elapsed = 0;
    /* warm-up: one short transfer per connection count, then STREAM_TIMED timed ones, each on fresh connections */
    for (int round = 0; round <= STREAM_TIMED; round++) {
        long long each = round == 0 ? bytes / conns / 16 + 8 : bytes / conns;
        for (int k = 0; k < conns; k++) {
            jobs[k] = (struct stream_job){.a = a, .bytes = each};
            jobs[k].fd = dial(&a);
            if (jobs[k].fd < 0) {
                errno = -jobs[k].fd;
                die("connect");
            }
        }
        if (round == 1) {
            ready("stream");
        }
        long long t0 = now_ns();
        for (int k = 0; k < conns; k++) {
            pthread_create(&th[k], NULL, stream_worker, &jobs[k]);
        }
        for (int k = 0; k < conns; k++) {
            pthread_join(th[k], NULL);
            close(jobs[k].fd);
            if (jobs[k].failed) {
                die("stream");
            }
        }
        if (round > 0) {
            elapsed += now_ns() - t0;
            for (int k = 0; k < conns; k++) {
                samples[(round - 1) * conns + k] = jobs[k].ns;
            }
        }
    }
    print_samples("stream", samples, (long) conns * STREAM_TIMED, elapsed, 0, (double) (bytes / conns) * conns * STREAM_TIMED);
    return 0;
}

/* ---- dns ---- */

static size_t dns_query(unsigned char *q, uint16_t id, const char *name) {
    size_t n = 0;
    q[n++] = (unsigned char) (id >> 8);
    q[n++] = (unsigned char) id;
    q[n++] = 0x01; /* RD */
    q[n++] = 0x00;
    q[n++] = 0;
    q[n++] = 1; /* QDCOUNT */
    memset(q + n, 0, 6);
    n += 6;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t) (dot - p) : strlen(p);
        q[n++] = (unsigned char) l;
        memcpy(q + n, p, l);
        n += l;
        p += l + (dot ? 1 : 0);
    }
    q[n++] = 0;
    q[n++] = 0;
    q[n++] = 1; /* A */
    q[n++] = 0;
    q[n++] = 1; /* IN */
    return n;
}

/* Returns the answer count, or -1. */
static int dns_once(int fd, uint16_t id, const char *name) {
    unsigned char q[512], r[1500];
    size_t n = dns_query(q, id, name);
    if (send(fd, q, n, 0) != (ssize_t) n) {
        return -1;
    }
    for (;;) {
        ssize_t got = recv(fd, r, sizeof r, 0);
        if (got < 12) {
            return -1;
        }
        if (r[0] == (id >> 8) && r[1] == (id & 0xff)) {
            if ((r[3] & 0x0f) != 0) {
                errno = EPROTO;
                return -1;
            }
            return (r[6] << 8) | r[7];
        }
    }
}

static int run_dns(const char *server, const char *name, long ops, long warmup) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {DNS_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = target(server, 53);
    if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) {
        die("connect udp");
    }
    uint16_t id = (uint16_t) getpid();
    /* A resolver may drop a query now and then (rate limits): a lost warm-up query is asked again. */
    long lost = 0;
    for (long i = 0; i < warmup;) {
        if (dns_once(fd, ++id, name) > 0) {
            i++;
        } else if (++lost > DNS_WARMUP_LOSSES) {
            die("warm-up queries (no answer or no A record)");
        }
    }
    ready("dns");
    long long *samples = calloc((size_t) ops, sizeof *samples);
    long errors = 0;
    long long t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        long long t = now_ns();
        if (dns_once(fd, ++id, name) <= 0) {
            errors++;
        }
        samples[i] = now_ns() - t;
    }
    print_samples("dns", samples, ops, now_ns() - t0, errors, 0);
    return 0;
}

/* ---- hold ---- */

static int run_hold(const char *host, int port, long n, const char *release, int max_s) {
    struct sockaddr_in a = target(host, port);
    long long *samples = calloc((size_t) n, sizeof *samples);
    int *fds = calloc((size_t) n, sizeof *fds);
    long long t0 = now_ns();
    for (long i = 0; i < n; i++) {
        long long t = now_ns();
        fds[i] = dial(&a);
        samples[i] = now_ns() - t;
        if (fds[i] < 0) {
            errno = -fds[i];
            die("connect");
        }
    }
    long long elapsed = now_ns() - t0;
    /* every connection proven open end to end before reporting */
    for (long i = 0; i < n; i++) {
        char b = 'h';
        if (full_write(fds[i], &b, 1) || full_read(fds[i], &b, 1)) {
            die("echo on a held connection");
        }
    }
    print_samples("hold", samples, n, elapsed, 0, 0);
    struct stat st;
    long long end = now_ns() + (long long) max_s * 1000000000LL;
    while (stat(release, &st) != 0 && now_ns() < end) {
        usleep(20000);
    }
    for (long i = 0; i < n; i++) {
        close(fds[i]);
    }
    printf("{\"released\":%ld}\n", n);
    return 0;
}

/* ---- rate ---- */

/*
 * Bounded by time, not by count: threads start connects on a pace of RATE per second until
 * SECONDS have passed (a machine too slow for the pace starts fewer), then stop starting new
 * ones; connects still in flight get RATE_DRAIN_S to end and are then abandoned (the process
 * exits, the kernel closes them) and reported as aborted. The counters are atomics so the main
 * thread can report while an abandoned worker is still blocked.
 *
 * Failures are classified so the harness can tell a slow machine from a wrong answer: "slow" is
 * a timeout or a bound reached under load (ETIMEDOUT: no decision in time; EAGAIN: a socket
 * timeout or the mediation's pending bound; EINPROGRESS: the connect's own send timeout), every
 * other errno is "other". A denied connect "refused" got EACCES or EPERM.
 */
struct rate_job {
    struct sockaddr_in allow, deny;
    double per_thread_rate;
    long long end;
    long started;
    long ok, failed_slow, failed_other, denied_ok, denied_refused, denied_slow, denied_other;
    long long *samples;
    long n, cap;
    int first_errno, first_denied_errno, done;
};

static int slow_errno(int e) {
    return e == ETIMEDOUT || e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS;
}

/* release: a reader that sees an outcome also sees the "started" counted before it */
static void bump(long *counter) {
    __atomic_fetch_add(counter, 1, __ATOMIC_RELEASE);
}

static long load(const long *counter) {
    return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

static void *rate_worker(void *p) {
    struct rate_job *j = p;
    long long interval = (long long) (1e9 / j->per_thread_rate);
    long long next = now_ns();
    long i = 0;
    for (;;) {
        long long t = now_ns();
        /* next >= end: the pace is done; t >= end: the time is up, however far behind the pace */
        if (next >= j->end || t >= j->end) {
            break;
        }
        if (t < next) {
            struct timespec s = {(time_t) ((next - t) / 1000000000LL), (long) ((next - t) % 1000000000LL)};
            nanosleep(&s, NULL);
        }
        next += interval;
        bump(&j->started);
        if (++i % 10 == 0) {
            int r = connect_once(&j->deny);
            if (r == 0) {
                bump(&j->denied_ok);
            } else if (r == -EACCES || r == -EPERM) {
                bump(&j->denied_refused);
            } else {
                if (!j->first_denied_errno) {
                    __atomic_store_n(&j->first_denied_errno, -r, __ATOMIC_RELAXED);
                }
                bump(slow_errno(-r) ? &j->denied_slow : &j->denied_other);
            }
            continue;
        }
        long long s = now_ns();
        int r = connect_once(&j->allow);
        long long took = now_ns() - s;
        if (j->n < j->cap) {
            j->samples[j->n] = took;
            __atomic_store_n(&j->n, j->n + 1, __ATOMIC_RELEASE);
        }
        if (r == 0) {
            bump(&j->ok);
        } else {
            /* the first errno that is not a timeout tells most; else the first timeout */
            if (!j->first_errno || (slow_errno(j->first_errno) && !slow_errno(-r))) {
                __atomic_store_n(&j->first_errno, -r, __ATOMIC_RELAXED);
            }
            bump(slow_errno(-r) ? &j->failed_slow : &j->failed_other);
        }
    }
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int run_rate(const char *host, int port, int deny_port, double rate, int seconds, int threads, const char *start) {
    if (threads < 1 || threads > MAX_THREADS) {
        threads = 1;
    }
    if (rate <= 0 || seconds < 1) {
        printf("{\"error\":\"rate and seconds must be positive\"}\n");
        return 1;
    }
    static struct rate_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    struct sockaddr_in allow = target(host, port), deny = target(host, deny_port);
    int w = connect_once(&allow);
    if (w != 0) {
        errno = -w;
        die("warm-up connect");
    }
    ready("rate");
    if (await_start(start)) {
        return 1;
    }
    long cap = (long) (rate * seconds / threads) + 16;
    long long t0 = now_ns();
    long long end = t0 + (long long) seconds * 1000000000LL;
    for (int k = 0; k < threads; k++) {
        jobs[k] = (struct rate_job){.allow = allow, .deny = deny, .per_thread_rate = rate / threads, .end = end, .cap = cap};
        jobs[k].samples = calloc((size_t) cap, sizeof(long long));
        if (!jobs[k].samples || pthread_create(&th[k], NULL, rate_worker, &jobs[k]) != 0) {
            die("rate thread");
        }
    }
    /* the drain: wait for every worker, but no longer than RATE_DRAIN_S after the end */
    long long drain_end = end + RATE_DRAIN_S * 1000000000LL;
    int all_done = 0;
    while (!all_done && now_ns() < drain_end) {
        all_done = 1;
        for (int k = 0; k < threads; k++) {
            all_done &= __atomic_load_n(&jobs[k].done, __ATOMIC_ACQUIRE);
        }
        if (!all_done) {
            usleep(10000);
        }
    }
    if (all_done) {
        for (int k = 0; k < threads; k++) {
            pthread_join(th[k], NULL);
        }
    }
    long long elapsed = now_ns() - t0;
    long started = 0, ok = 0, fslow = 0, fother = 0, dok = 0, dref = 0, dslow = 0, doth = 0, n = 0;
    int first = 0, first_denied = 0;
    for (int k = 0; k < threads; k++) {
        struct rate_job *j = &jobs[k];
        /* outcomes before "started": every op with an outcome read here is also in "started" */
        ok += load(&j->ok);
        fslow += load(&j->failed_slow);
        fother += load(&j->failed_other);
        dok += load(&j->denied_ok);
        dref += load(&j->denied_refused);
        dslow += load(&j->denied_slow);
        doth += load(&j->denied_other);
        started += load(&j->started);
        n += load(&j->n);
        int e = __atomic_load_n(&j->first_errno, __ATOMIC_RELAXED);
        if (e && (!first || (slow_errno(first) && !slow_errno(e)))) {
            first = e;
        }
        if (!first_denied) {
            first_denied = __atomic_load_n(&j->first_denied_errno, __ATOMIC_RELAXED);
        }
    }
    long long *all = calloc((size_t) n + 1, sizeof *all);
    long m = 0;
    for (int k = 0; k < threads && m < n; k++) {
        long jn = load(&jobs[k].n);
        if (jn > n - m) {
            jn = n - m;
        }
        memcpy(all + m, jobs[k].samples, (size_t) jn * sizeof *all);
        m += jn;
    }
    /* started but without an outcome when the drain ended: abandoned in flight */
    long aborted = started - (ok + fslow + fother + dok + dref + dslow + doth);
    printf("{\"rate\":{\"target_per_s\":%.3f,\"seconds\":%d,\"drain_s\":%d,\"threads\":%d,\"attempted\":%ld,"
           "\"ok\":%ld,\"failed\":%ld,\"failed_slow\":%ld,\"failed_other\":%ld,\"first_error\":\"%s\","
           "\"denied_connected\":%ld,\"denied_refused\":%ld,\"denied_slow\":%ld,\"denied_other\":%ld,"
           "\"first_denied_error\":\"%s\",\"aborted\":%ld,\"window_ns\":%lld,\"elapsed_ns\":%lld,"
           "\"achieved_per_s\":%.3f}}\n",
           rate, seconds, RATE_DRAIN_S, threads, started, ok, fslow + fother, fslow, fother, first ? strerror(first) : "",
           dok, dref, dslow, doth, first_denied ? strerror(first_denied) : "", aborted, end - t0, elapsed,
           started / (double) seconds);
    print_samples("rate", all, m, elapsed, fslow + fother, 0);
    /* abandoned workers may still be blocked in a connect: exit ends them */
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 3 && !strcmp(argv[1], "serve")) {
        return serve(argv[2]);
    }
    signal(SIGALRM, on_alarm);
    alarm(RUN_DEADLINE_S);
    if ((argc == 7 || argc == 8) && !strcmp(argv[1], "connect")) {
        return run_connect(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]), atol(argv[6]), argc == 8 ? argv[7] : NULL);
    }
    if (argc == 7 && !strcmp(argv[1], "rr")) {
        return run_rr(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]), atol(argv[6]));
    }
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "stream")) {
        return run_stream(argv[2], atoi(argv[3]), atoll(argv[4]), atoi(argv[5]), argc == 7 ? argv[6] : NULL);
    }
    if (argc == 6 && !strcmp(argv[1], "dns")) {
        return run_dns(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
    }
    if (argc == 7 && !strcmp(argv[1], "hold")) {
        return run_hold(argv[2], atoi(argv[3]), atol(argv[4]), argv[5], atoi(argv[6]));
    }
    if ((argc == 8 || argc == 9) && !strcmp(argv[1], "rate")) {
        return run_rate(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]), atoi(argv[6]), atoi(argv[7]),
                        argc == 9 ? argv[8] : NULL);
    }
    fprintf(stderr, "usage: see the comment at the top of osperf.c\n");
    return 2;
}
