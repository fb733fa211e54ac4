#!/bin/sh
# Builds one runtime image (called by the jlink/openshell-* modules in process-test-classes).
#
#   link-image.sh NAME JAVA_HOME STAGING OUT IMAGE_SRC
#
# STAGING holds the application jars (app/) and, if the image uses JNA, libjnidispatch.so as
# unpacked from the jna jar (jna-unpacked/com/sun/jna/linux-x86-64/), and, if the image launches
# workload processes, the native launcher (native/openshell-launcher); IMAGE_SRC holds
# NAME.args (the JVM options and main module, paths relative to the image), train.sh (the
# training run of the AOT cache, run in the image's directory with NAME, JAVA_HOME, STAGING and
# IMAGE_SRC), jdk-modules.add (modules jdeps cannot see, with reasons) and security-providers
# (the JCA providers the image lists, in order).
#
# Steps: JDK modules from jdeps over every application jar (+ jdk-modules.add); jlink a runtime
# of exactly those; strip libjvm's symbol table; only the listed security providers; app jars into app/, JNA's native library into
# lib/jna; train the AOT cache lib/NAME.aot by running the image; bin/NAME launcher.
set -eu
name=$1 jdk=$2 staging=$3 out=$4 src=$5

fail() { echo "link-image: $name: $*" >&2; exit 1; }
[ -d "$staging/app" ] || fail "no application jars in $staging/app"
jna=$staging/jna-unpacked/com/sun/jna/linux-x86-64/libjnidispatch.so

# 1. The JDK modules: what jdeps finds in the bytecode and descriptors of every jar on the path.
modules=$("$jdk/bin/jdeps" --print-module-deps --ignore-missing-deps --multi-release 25 \
    --module-path "$staging/app" --add-modules ALL-MODULE-PATH)
[ -n "$modules" ] || fail "jdeps printed no modules"
extra=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src/jdk-modules.add" | tr -d ' \t' | paste -sd, -)
[ -n "$extra" ] && modules="$modules,$extra"
mkdir -p "$staging"
echo "$modules" > "$staging/jdeps-modules.txt"

# 2. The runtime: only those modules (jlink adds what they require). zip-9 costs little at start:
#    classes come from the AOT cache.
rm -rf "$out"
"$jdk/bin/jlink" --add-modules "$modules" --output "$out" --strip-debug --no-man-pages \
    --no-header-files --compress=zip-9
# The linkable runtime's libjvm.so keeps its symbol table (~5 MiB); nothing at run time reads it.
if command -v strip >/dev/null 2>&1; then
    strip --strip-unneeded "$out/lib/server/libjvm.so"
else
    echo "link-image: $name: WARNING: no strip (binutils); libjvm.so keeps ~5 MiB of symbols" >&2
fi

# 2b. Security providers: only those the program uses (security-providers, one name a line, in
#     order). The JDK's list names providers of modules the image does not have (SunJGSS, XMLDSig,
#     SunPCSC, SunPKCS11) or loads through ServiceLoader (SunSASL, JdkLDAP, JdkSASL); the first
#     algorithm lookup that misses (the TLS handshake's named groups) walks them all, and
#     ServiceLoader then instantiates every provider on the module path on the way:
#     BouncyCastle's, ~370 classes and 0.3-0.5 s of start-up, never used as a provider.
if [ -f "$src/security-providers" ]; then
    providers=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src/security-providers" | tr -d ' \t')
    [ -n "$providers" ] || fail "security-providers lists no provider"
    security="$out/conf/security/java.security"
    grep -q '^security\.provider\.1=' "$security" || fail "no security.provider list in $security"
    echo "$providers" | awk 'NR == FNR { list[++n] = $0; next }
        /^security\.provider\.[0-9]+=/ { if (!done) { for (i = 1; i <= n; i++) print "security.provider." i "=" list[i]; done = 1 } next }
        { print }' - "$security" > "$security.new"
    mv "$security.new" "$security"
fi

# 3. The application: jars on the image's module path, JNA's native library where
#    jna.boot.library.path points (never extracted to /tmp).
mkdir -p "$out/app" "$out/conf"
cp "$staging"/app/*.jar "$out/app/"
if [ -f "$jna" ]; then
    mkdir -p "$out/lib/jna"
    cp "$jna" "$out/lib/jna/"
fi
# The native workload launcher (openshell.linux's src/main/c), where the runtime looks for it:
# lib/openshell-launcher under its java.home.
if [ -f "$staging/native/openshell-launcher" ]; then
    cp "$staging/native/openshell-launcher" "$out/lib/openshell-launcher"
    chmod 755 "$out/lib/openshell-launcher"
fi
cp "$src/$name.args" "$out/conf/$name.args"
# The JIT's compiler directives, where an image has them (conf/NAME.jit.json, named by its .args).
if [ -f "$src/$name.jit.json" ]; then
    cp "$src/$name.jit.json" "$out/conf/$name.jit.json"
fi
# Signed jars (BouncyCastle's) lose their signature in the image: at every start the JDK parses and
# checks a signed jar's per-entry digest list (bcprov: an 820 KB manifest and a 790 KB .SF) on first
# use, and the AOT cache never archives a class of a signed jar. Inside this image a signature
# proves nothing (whoever can change a jar can change the launcher); Maven checked each artifact's
# checksum when it fetched it. The manifest keeps its main section (Multi-Release, Automatic-Module-Name).
if command -v zip >/dev/null 2>&1 && command -v unzip >/dev/null 2>&1; then
    for jar in "$out"/app/*.jar; do
        signatures=$(unzip -Z1 "$jar" | grep -E '^META-INF/[^/]+\.(SF|DSA|RSA|EC)$' || true)
        [ -n "$signatures" ] || continue
        manifest=$(mktemp -d)
        mkdir "$manifest/META-INF"
        unzip -p "$jar" META-INF/MANIFEST.MF | tr -d '\r' | awk '/^$/ { exit } { print }' > "$manifest/META-INF/MANIFEST.MF"
        # shellcheck disable=SC2086 # one entry name a word, none has blanks
        zip -q -d "$jar" $signatures
        ( cd "$manifest" && zip -q "$jar" META-INF/MANIFEST.MF )
        rm -rf "$manifest"
    done
else
    echo "link-image: $name: WARNING: no zip/unzip: signed jars stay signed (slower start, classes not cached)" >&2
fi

# 4. The AOT cache, trained by a run of this very image (same options, same relative paths).
#    train.sh exits 75 when the image has nothing to train yet (no main class): the image is then
#    built without a cache, loudly; the launcher then passes no -XX:AOTCache (a missing
#    cache file stops the JVM).
#    Its output (the JVM's AOT notes, hundreds of "Skipping <class>" lines, and the training
#    sandbox's own lines) goes to a log beside the image; a failed or cacheless run shows its end.
status=0
training_log="$out/../$name-training.log"
( cd "$out" && sh "$src/train.sh" "$name" "$jdk" "$staging" "$src" ) >"$training_log" 2>&1 || status=$?
# train.sh's own WARNING lines (a fallback training) are for whoever builds: they stay visible.
grep -E '^train\.sh: ' "$training_log" >&2 || true
if [ "$status" -ne 0 ]; then
    echo "link-image: $name: the training run ended with $status; the end of $training_log:" >&2
    tail -n 40 "$training_log" >&2
fi
if [ "$status" -eq 75 ]; then
    echo "link-image: $name: WARNING: NO AOT CACHE: train.sh found nothing to train (see its output)" >&2
else
    [ "$status" -eq 0 ] || fail "training run failed ($status)"
    [ -s "$out/lib/$name.aot" ] || fail "training produced no lib/$name.aot"
fi
rm -f "$out/lib/$name.aot.config"

# 4b. Where the root file system is not ours (a container's workload image, which may hold musl,
#     one static binary, or a hostile loader set-up): a static launcher, bin/NAME-static (built
#     from IMAGE_SRC/NAME-static.c), and the image's own glibc in lib/glibc, which that launcher
#     runs bin/java through (see the C file and jlink/README.md). The loader and libc are the build
#     machine's (Debian's libc6, glibc 2.36), with two paths a root file system could use to load
#     code into any glibc program renamed to ones under /proc/- that cannot exist:
#     /etc/ld.so.preload (ld.so reads it whatever the environment) and /etc/nsswitch.conf (its
#     services are dlopen'ed). Equal lengths, so nothing else in the files moves.
if [ -f "$src/$name-static.c" ]; then
    command -v gcc >/dev/null 2>&1 || fail "no gcc for bin/$name-static"
    gcc -std=gnu11 -O2 -Wall -Wextra -Werror -Wformat=2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
        -static -s -o "$out/bin/$name-static" "$src/$name-static.c"
    glibc=/lib/x86_64-linux-gnu
    mkdir -p "$out/lib/glibc"
    for library in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1; do
        [ -f "$glibc/$library" ] || fail "no $glibc/$library (Debian's libc6 and libgcc-s1) for lib/glibc"
        cp -L "$glibc/$library" "$out/lib/glibc/$library"
    done
    rename_path() { # rename_path FILE OLD NEW (same length)
        [ "${#2}" -eq "${#3}" ] || fail "rename_path: $2 and $3 differ in length"
        grep -qF "$2" "$1" || fail "no $2 in $1"
        OLD=$2 NEW=$3 perl -0777 -pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/g' "$1"
        ! grep -qF "$2" "$1" || fail "$2 is still in $1"
    }
    rename_path "$out/lib/glibc/ld-linux-x86-64.so.2" /etc/ld.so.preload /proc/-/ld.preload
    rename_path "$out/lib/glibc/libc.so.6" /etc/nsswitch.conf /proc/-/nsswitch.c
    chmod 0755 "$out/lib/glibc/"*
fi

# 5. The launcher: the only shell in the image, and only for hosts that start it by path. It
#    changes to the image's directory so every path in the argument file (and so in the AOT
#    cache, which records the module path) is the same wherever the image is mounted.
aot=
[ -s "$out/lib/$name.aot" ] && aot="-XX:AOTCache=lib/$name.aot "
cat > "$out/bin/$name" <<LAUNCHER
#!/bin/sh
# $name launcher (generated by jlink/link-image.sh). Needs /bin/sh and the C library, nothing
# else from the host: no system Java, no JAVA_HOME, no coreutils. Arguments must be absolute
# paths (the working directory becomes this image's directory). Without a shell, run
#   <image>/bin/java $aot@conf/$name.args ARGS
# with <image> as the working directory (what the container recipes in images/ do).
case \$0 in
    */*) bin=\${0%/*} ;;
    *) echo "$name: start me by path, not from PATH" >&2; exit 127 ;;
esac
cd -P -- "\$bin/.." || exit 127
# The host's Java settings are not ours; the runtime's JVM options are fixed by the image.
unset JAVA_TOOL_OPTIONS JDK_JAVA_OPTIONS _JAVA_OPTIONS CLASSPATH
exec bin/java $aot@conf/$name.args "\$@"
LAUNCHER
chmod 0755 "$out/bin/$name"

echo "link-image: $name: $(du -sh "$out" | cut -f1) with JDK modules $modules"
