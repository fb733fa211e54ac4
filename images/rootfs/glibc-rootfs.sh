#!/bin/sh
# The base of the supervisor container: the C library and nothing else, from Debian packages.
#
#   images/rootfs/glibc-rootfs.sh OUT.tar     then   docker import OUT.tar openshell/glibc:bookworm
#                                                    (or podman import)
#
# The runtime images need only glibc (>= 2.17, see jlink/README.md): libc6 and its one
# dependency libgcc-s1, unpacked with dpkg-deb (no maintainer scripts run), plus /tmp and the
# nobody account. Packages come from the host's apt sources; nothing else is downloaded.
set -eu
out=${1:?usage: glibc-rootfs.sh OUT.tar}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libc6 libgcc-s1)
mkdir -p "$work/root"
for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
done
mkdir -p "$work/root/tmp" "$work/root/etc"
chmod 1777 "$work/root/tmp"
echo 'root:x:0:0:root:/:/nonexistent' > "$work/root/etc/passwd"
echo 'nobody:x:65534:65534:nobody:/nonexistent:/nonexistent' >> "$work/root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$work/root/etc/group"
tar -C "$work/root" -cf "$out" .
echo "glibc-rootfs: $out ($(du -h "$out" | cut -f1)); import it as openshell/glibc:bookworm"
