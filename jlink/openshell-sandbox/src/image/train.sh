# Training run of the sandbox image's AOT cache (run by jlink/link-image.sh in the image's
# directory: NAME, the build's JAVA_HOME, STAGING and IMAGE_SRC as $1-$4).
#
# OPENSHELL_SANDBOX_TRAINING (the build property openshell.sandbox.training) picks the run:
#
#   serve (default)  one sandbox launched by this build's gateway and process driver from this
#                    image and the supervisor image (ServeTraining.java, build JDK): bundle,
#                    probes, TLS link, attach, confirm, agent, the gateway session, one exec
#                    through the REST API (bash making 3,000 mediated connects by name: the
#                    connect and DNS paths), exit. Needs root (the driver maps a uid range),
#                    /bin/bash, and the supervisor image (the reactor builds
#                    jlink/openshell-supervisor first). Cache ~34 MiB, image ~86.5 MiB (budget 90). The same run replaces the
#                    supervisor image's cache with one trained by this boundary (~38 MiB).
#   check            FALLBACK ONLY (a build that is not root, or a serve run that failed: both
#                    said loudly on stderr, the build goes on): the runtime's health probe,
#                    --check: the startup path (probes, resolver view, DNS relay); it ends by
#                    itself. Needs fresh network and mount namespaces (unshare, a build-time tool,
#                    never in the image). Cache ~16 MiB; the serve path then starts ~35 % slower
#                    (tests/perf/README.md).
name=$1 jdk=$2 staging=$3 src=$4
check() {
    exec unshare --user --map-root-user --net --mount bin/java -XX:AOTCacheOutput="lib/$name.aot" "@conf/$name.args" --check
}
loudly() {
    echo "train.sh: WARNING: $name: $1; training on --check instead: this image's serve path starts ~35 % slower" >&2
}
case ${OPENSHELL_SANDBOX_TRAINING:-serve} in
    check)
        check ;;
    serve)
        if [ "$(id -u)" != 0 ]; then
            loudly "serve training needs root (the process driver maps a uid range)"
            check
        fi
        # Minting (BouncyCastle) runs in the gateway's JVM (the build's JDK, the training jars) and
        # the protocol's client side in the supervisor's: only the runtime's own classes go into
        # the sandbox image's cache.
        if ! "$jdk/bin/java" --module-path "$staging/app:$staging/training" --add-modules ALL-MODULE-PATH \
            --add-exports openshell.protocol/openshell.protocol=ALL-UNNAMED \
            "$src/ServeTraining.java" "$PWD" "$src/../../../openshell-supervisor/target/openshell-supervisor" "$name"; then
            loudly "the serve training run failed (its output is in target/$name-training.log)"
            rm -f "lib/$name.aot"
            check
        fi ;;
    *)
        echo "train.sh: $name: unknown OPENSHELL_SANDBOX_TRAINING=$OPENSHELL_SANDBOX_TRAINING (check or serve)" >&2
        exit 1 ;;
esac
