# openshell-sandbox layered into a workload image (docker and podman drivers).
#
# context: jlink/openshell-sandbox/target/openshell-sandbox
# build:   docker build -f images/docker/sandbox-layered.Dockerfile \
#            --build-arg WORKLOAD_IMAGE=<the user's image> jlink/openshell-sandbox/target/openshell-sandbox
#
# The workload image is the user's, never built by us: this adds one layer, the runtime image at
# /opt/openshell/sandbox, and makes the runtime the entry point (PID 1, the workload's subreaper).
# The entry point is exec form: the workload needs no shell and no Java, only a glibc >= 2.17.
# WORKDIR is the image's directory because every path in the argument file and the AOT cache is
# relative to it; the runtime gives each workload process its own working directory.
ARG WORKLOAD_IMAGE
FROM ${WORKLOAD_IMAGE}
COPY . /opt/openshell/sandbox
WORKDIR /opt/openshell/sandbox
ENTRYPOINT ["/opt/openshell/sandbox/bin/java", "-XX:AOTCache=lib/openshell-sandbox.aot", "@conf/openshell-sandbox.args"]
