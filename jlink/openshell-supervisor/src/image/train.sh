# Training run of the supervisor image's AOT cache (run by jlink/link-image.sh in the image's
# directory, NAME as $1, the build's JAVA_HOME as $2).
#
# openshell.supervisor.SupervisorMain arrives with the mains branch. Until then there is nothing
# to train: exit 75, and the image is built without a cache (the smoke test says so, loudly).
# Once it exists, the run below starts it without arguments: it loads the module graph and the
# main class and ends with its usage error. That cache is only what an image built alone gets:
# jlink/openshell-sandbox, built next, replaces it with one trained by a real boundary (the serve
# training, ../../openshell-sandbox/src/image/ServeTraining.java), since that run needs both images.
name=$1 jdk=$2
main=openshell/supervisor/SupervisorMain.class
if ! "$jdk/bin/jar" --list --file app/openshell-supervisor-*.jar | grep -qx "$main"; then
    echo "train.sh: $name: $main is not in this build: no AOT cache (it lands with SupervisorMain)" >&2
    exit 75
fi
bin/java -XX:AOTCacheOutput="lib/$name.aot" "@conf/$name.args" </dev/null || true
