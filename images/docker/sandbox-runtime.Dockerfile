# openshell-sandbox as a data-only image, to be mounted into a workload container instead of
# layered (docker and podman drivers): `docker create` it once, then run the workload with
# `--volumes-from` or an image/volume mount at /opt/openshell/sandbox (read-only) and the same
# entry point and working directory as sandbox-layered.Dockerfile.
#
# context: jlink/openshell-sandbox/target/openshell-sandbox
# build:   docker build -f images/docker/sandbox-runtime.Dockerfile -t openshell/sandbox-runtime \
#            jlink/openshell-sandbox/target/openshell-sandbox
#
# FROM scratch: nothing but the runtime image; it never runs on its own.
FROM scratch
COPY . /opt/openshell/sandbox
VOLUME /opt/openshell/sandbox
WORKDIR /opt/openshell/sandbox
ENTRYPOINT ["/opt/openshell/sandbox/bin/java", "-XX:AOTCache=lib/openshell-sandbox.aot", "@conf/openshell-sandbox.args"]
