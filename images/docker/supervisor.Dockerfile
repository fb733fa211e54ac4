# openshell-supervisor in its own container (docker and podman drivers).
#
# context: jlink/openshell-supervisor/target/openshell-supervisor
# base:    openshell/glibc:bookworm, made by images/rootfs/glibc-rootfs.sh (Debian packages only;
#          no registry is reachable, so the base is imported, never pulled)
# build:   docker build -f images/docker/supervisor.Dockerfile -t openshell/supervisor \
#            jlink/openshell-supervisor/target/openshell-supervisor
#
# The supervisor needs no root: it listens on the sandbox's Unix socket and dials upstream.
FROM openshell/glibc:bookworm
COPY . /opt/openshell/supervisor
WORKDIR /opt/openshell/supervisor
USER 65534:65534
ENTRYPOINT ["/opt/openshell/supervisor/bin/java", "-XX:AOTCache=lib/openshell-supervisor.aot", "@conf/openshell-supervisor.args"]
