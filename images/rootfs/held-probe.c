/*
 * held-probe: a workload program for tests/docker, compiled static into the musl test image by
 * test-images.sh. It opens TCP sockets and connects one later, to show where the sandbox runtime
 * (which holds each socket from its socket() call where pidfd_getfd is refused) lets go of it.
 *
 *   held-probe wait SECONDS PORT   one socket, SECONDS of sleep, then connect to 127.0.0.1:PORT
 *   held-probe many COUNT PORT     COUNT sockets, then connect the first to 127.0.0.1:PORT
 *
 * Prints "connect=0" or "connect=<errno>" and exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: held-probe wait SECONDS PORT | many COUNT PORT\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short) atoi(argv[3]))};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int first = socket(AF_INET, SOCK_STREAM, 0);
    if (first < 0) {
        printf("socket=%d\n", errno);
        return 0;
    }
    if (strcmp(argv[1], "wait") == 0) {
        sleep((unsigned) n);
    } else {
        for (long i = 1; i < n; i++) {
            if (socket(AF_INET, SOCK_STREAM, 0) < 0) {
                printf("socket=%d\n", errno);
                return 0;
            }
        }
    }
    int rc = connect(first, (struct sockaddr *) &to, sizeof to);
    printf("connect=%d\n", rc == 0 ? 0 : errno);
    return 0;
}
