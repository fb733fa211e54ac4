#!/bin/sh
# Root file systems of the workload images the Docker suites (tests/docker) run the sandbox
# runtime in, from Debian packages (no registry is reachable here):
#
#   images/rootfs/test-images.sh OUTDIR     then   docker import OUTDIR/NAME.tar IMAGE
#
#   glibc.tar    Debian's libc6 + libgcc-s1 and the dynamically linked busybox (so its tools need
#                the image's glibc); glibc and musl both hold a copy of busybox at
#                /usr/local/bin/busybox (a binary a policy naming /bin/busybox does not allow), /etc/passwd with agent (10001:10001: a uid no host account has, see tests/docker), /tmp
#   musl.tar     Debian's musl and busybox-static, NO glibc (no /lib64/ld-linux-x86-64.so.2,
#                no libc.so.6), the same accounts, and /usr/local/bin/held-probe (static, from
#                held-probe.c) (Debian's busybox 1.35 wget crashes on -T: the suites never pass it)
#   scratch.tar  one static binary, /bin/busybox (busybox-static), nothing else: no /etc,
#                no /tmp, no accounts (a FROM scratch image)
#   hostile.tar  busybox-static as /bin/busybox, the glibc libraries, and what would take over a
#                runtime that trusted its root file system: /lib/evil.so (prints EVIL-PRELOAD
#                and exits 66 when loaded; the suite's import sets LD_PRELOAD and
#                JAVA_TOOL_OPTIONS to it in the image's ENV), /etc/ld.so.preload naming it,
#                /etc/nsswitch.conf naming an "evil" service (libnss_evil.so.2, the same code), and
#                files at the runtime's own mount point /.openshell/runtime (a shadow launcher
#                and argument file) that the read-only mount must cover
#
# Packages come from the host's apt sources (apt-get download, unpacked with dpkg-deb: no
# maintainer scripts run); evil.so is compiled with the host's gcc.
set -eu
out=${1:?usage: test-images.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q=2 libc6 libgcc-s1 busybox busybox-static musl 2>/dev/null)
# A second binary with busybox's bytes at another path (same name, so its applets still work): a
# policy that names /bin/busybox does not allow /usr/local/bin/busybox.
other_busybox() {
    mkdir -p "$1/usr/local/bin"
    cp "$1/bin/busybox" "$1/usr/local/bin/busybox"
}
unpack() { # unpack ROOT PACKAGE...
    root=$1; shift
    mkdir -p "$root"
    for package in "$@"; do
        dpkg-deb -x "$work/$package"_*.deb "$root"
    done
}
accounts() {
    mkdir -p "$1/etc" "$1/tmp"
    chmod 1777 "$1/tmp"
    printf 'root:x:0:0:root:/:/nonexistent\nagent:x:10001:10001:agent:/tmp:/nonexistent\n' > "$1/etc/passwd"
    printf 'root:x:0:\nagent:x:10001:\n' > "$1/etc/group"
}
# busybox-static ships /bin/busybox; the applets the suites call are links to it.
applets() {
    for applet in sh wget cat ls echo sleep id env; do
        ln -sf busybox "$1/bin/$applet"
    done
}

unpack "$work/glibc" libc6 libgcc-s1 busybox
accounts "$work/glibc"
applets "$work/glibc"
other_busybox "$work/glibc"
tar -C "$work/glibc" -cf "$out/glibc.tar" .

unpack "$work/musl" musl busybox-static
accounts "$work/musl"
applets "$work/musl"
other_busybox "$work/musl"
# held-probe (held-probe.c beside this script), static: opens sockets and connects one later.
gcc -static -O2 -o "$work/musl/usr/local/bin/held-probe" "$(dirname "$0")/held-probe.c"
if find "$work/musl" -name 'libc.so.6' -o -name 'ld-linux-x86-64.so.2' | grep -q .; then
    echo "test-images: the musl image holds glibc" >&2; exit 1
fi
tar -C "$work/musl" -cf "$out/musl.tar" .

mkdir -p "$work/scratch/bin"
dpkg-deb --fsys-tarfile "$work"/busybox-static_*.deb | tar -xO ./bin/busybox > "$work/scratch/bin/busybox"
chmod 0755 "$work/scratch/bin/busybox"
tar -C "$work/scratch" -cf "$out/scratch.tar" .

unpack "$work/hostile" libc6 libgcc-s1 busybox-static
accounts "$work/hostile"
applets "$work/hostile"
cat > "$work/evil.c" <<'EOF'
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
    static const char line[] = "EVIL-PRELOAD\n";
    (void) write(2, line, sizeof line - 1);
    _exit(66);
}
EOF
gcc -shared -fPIC -o "$work/hostile/lib/evil.so" "$work/evil.c"
echo /lib/evil.so > "$work/hostile/etc/ld.so.preload"
# An NSS service glibc would dlopen from the image's library directory for any user lookup.
printf 'passwd: evil files\ngroup: evil files\nhosts: evil files dns\n' > "$work/hostile/etc/nsswitch.conf"
cp "$work/hostile/lib/evil.so" "$work/hostile/lib/x86_64-linux-gnu/libnss_evil.so.2"
mkdir -p "$work/hostile/.openshell/runtime/bin" "$work/hostile/.openshell/runtime/conf"
printf '#!/bin/busybox sh\necho SHADOWED-LAUNCHER >&2\nexit 67\n' > "$work/hostile/.openshell/runtime/bin/openshell-sandbox-static"
chmod 0755 "$work/hostile/.openshell/runtime/bin/openshell-sandbox-static"
printf -- '-XX:+PrintFlagsFinal\n' > "$work/hostile/.openshell/runtime/conf/openshell-sandbox.args"
tar -C "$work/hostile" -cf "$out/hostile.tar" .
echo "test-images: $out/{glibc,musl,scratch,hostile}.tar"
