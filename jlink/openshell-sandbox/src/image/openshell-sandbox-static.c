/*
 * openshell-sandbox-static: the sandbox image's entry point where the root file system is not
 * ours (a container's workload image: glibc, musl, or one static binary and nothing else).
 *
 * Why a static program and not the sh launcher: the image may have no /bin/sh, no glibc and no
 * loader at /lib64, and whatever it does have is the workload's, not ours. So this program
 * depends on nothing outside the image directory it was started from:
 *
 *   - it finds that directory from /proc/self/exe (bin/openshell-sandbox-static in it), so it
 *     works at any mount point (the Docker driver's /.openshell/runtime), and changes to it: the
 *     argument file and the AOT cache name paths relative to it;
 *   - it runs bin/java through the image's own glibc loader, lib/glibc/ld-linux-x86-64.so.2,
 *     with --library-path lib/glibc (the image's libc, libm, libdl, libpthread, librt) and
 *     --inhibit-cache (never the image's /etc/ld.so.cache); the JDK's own libraries find each
 *     other through their $ORIGIN run paths;
 *   - the JVM gets an EMPTY environment: a workload image's ENV (LD_PRELOAD, LD_LIBRARY_PATH,
 *     GLIBC_TUNABLES, JAVA_TOOL_OPTIONS, _JAVA_OPTIONS, JDK_JAVA_OPTIONS, CLASSPATH, HTTP_PROXY,
 *     ...) is inherited by the container's PID 1, and the loader and the JVM would honour some of
 *     them. Overriding the names with empty values is not enough (the list is open-ended, and
 *     the image could set names nobody thought of); nothing of it reaches the runtime. The
 *     runtime's options are fixed by its argument file and its command line;
 *   - the loader copy in lib/glibc has its two file names that a root file system could use to
 *     inject code changed at build time (link-image.sh): /etc/ld.so.preload (read even with an
 *     empty environment) and, in libc.so.6, /etc/nsswitch.conf (whose services are loaded with
 *     dlopen), each to a path under /proc/- that cannot exist.
 *
 * Arguments are passed on unchanged after the argument file. Exit 127 when it cannot start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SELF_NAME "openshell-sandbox-static"
#define NAME "openshell-sandbox"
#define MAX_ARGS 256

static void die(const char *what) {
    fprintf(stderr, "%s: %s: %s\n", SELF_NAME, what, strerror(errno));
    _exit(127);
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) {
        die("readlink /proc/self/exe");
    }
    self[length] = '\0';
    /* <image>/bin/openshell-sandbox-static -> <image> */
    for (int cut = 0; cut < 2; cut++) {
        char *slash = strrchr(self, '/');
        if (slash == NULL) {
            errno = EINVAL;
            die("image directory of /proc/self/exe");
        }
        *slash = '\0';
    }
    if (self[0] == '\0') {
        strcpy(self, "/");
    }
    if (chdir(self) != 0) {
        die("chdir to the image directory");
    }
    if (argc > MAX_ARGS) {
        errno = E2BIG;
        die("too many arguments");
    }
    char loader[PATH_MAX];
    char libraries[PATH_MAX];
    if (snprintf(loader, sizeof loader, "%s/lib/glibc/ld-linux-x86-64.so.2", self) >= (int) sizeof loader
            || snprintf(libraries, sizeof libraries, "%s/lib/glibc", self) >= (int) sizeof libraries) {
        errno = ENAMETOOLONG;
        die("image directory");
    }
    char *args[MAX_ARGS + 16];
    int n = 0;
    args[n++] = NAME;
    args[n++] = "--inhibit-cache";
    args[n++] = "--library-path";
    args[n++] = libraries;
    args[n++] = "--argv0";
    args[n++] = NAME;
    args[n++] = "bin/java";
    if (access("lib/" NAME ".aot", R_OK) == 0) {
        args[n++] = "-XX:AOTCache=lib/" NAME ".aot";
    }
    args[n++] = "@conf/" NAME ".args";
    for (int i = 1; i < argc; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;
    char *empty[] = {NULL};
    execve(loader, args, empty);
    die(loader);
}
