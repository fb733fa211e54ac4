/**
 * The Docker compute driver: each sandbox is a workload container from the user's image, pinned
 * by id, with no network ({@code network_mode=none}), no capabilities, no privilege gain and
 * Docker's default seccomp profile, running the sandbox runtime as PID 1 from a read-only mount
 * as the policy's or the image's non-root user; beside it a companion supervisor container (user
 * 65534, read-only root file system, no capabilities), the only one with a network; and a channel
 * volume shared by exactly these two, on which the supervisor listens and the runtime dials. The
 * fence is verified by inspect after create and at every status poll; a violation stops the
 * sandbox. Launch bundles go to each program's standard input and nowhere else.
 *
 * <p>Settings ({@code gateway start --driver docker --driver-setting KEY=VALUE}): {@code docker.host}
 * (default {@code unix:///var/run/docker.sock}), {@code runtime.dir} and {@code supervisor.dir} (the
 * jlink-built images; by default two levels above {@code runtime.launcher} and
 * {@code supervisor.launcher}), {@code supervisor.image} (default {@code openshell/glibc:bookworm}),
 * {@code namespace} (default {@code default}), {@code limits.pids}, {@code limits.memory},
 * {@code limits.cpus}, {@code connection.direction}. Options of a create: {@code image} (required)
 * and {@code workspace} (a named volume, admitted by {@code VolumeOwnership}).
 *
 * <p>docker-java's jars are automatic modules and declare no dependencies: the explicit modules
 * they load are required here so the boot layer has them.
 *
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code ApiVersion.MINIMUM}</td><td>Engine API 1.41 (Docker 20.10)</td><td>UNAVAILABLE naming both versions</td></tr>
 * <tr><td>{@code ApiVersion.NEWEST}</td><td>Engine API 1.45</td><td>a newer daemon is spoken to at 1.45; fields newer than the daemon's are not sent</td></tr>
 * <tr><td>{@code Engine.CONNECT_TIMEOUT}</td><td>5 s</td><td>UNAVAILABLE naming the socket and how to start dockerd</td></tr>
 * <tr><td>{@code Engine.RESPONSE_TIMEOUT}</td><td>60 s per engine call</td><td>FAILED, what was made is removed</td></tr>
 * <tr><td>{@code DockerSettings.DEFAULT_PIDS}</td><td>1024 (from {@code MIN_PIDS} 64 to {@code MAX_PIDS} 65,536)</td><td>the setting refused (INVALID)</td></tr>
 * <tr><td>{@code DockerSettings.DEFAULT_MEMORY}</td><td>2 GiB (from {@code MIN_MEMORY} 128 MiB to {@code MAX_MEMORY} 64 GiB)</td><td>the setting refused (INVALID)</td></tr>
 * <tr><td>{@code DockerSettings.DEFAULT_MILLI_CPUS}</td><td>2 CPUs (from {@code MIN_MILLI_CPUS} 0.1 to {@code MAX_MILLI_CPUS} 64)</td><td>the setting refused (INVALID)</td></tr>
 * <tr><td>{@code DockerDriver.WORKSPACE_TMPFS_BYTES}</td><td>512 MiB</td><td>the workspace is full (ENOSPC)</td></tr>
 * <tr><td>{@code DockerDriver.TMP_TMPFS_BYTES}</td><td>64 MiB, a /tmp for an image that has none</td><td>ENOSPC</td></tr>
 * <tr><td>{@code DockerDriver.SUPERVISOR_MEMORY}</td><td>512 MiB</td><td>the supervisor is killed; the workload is stopped</td></tr>
 * <tr><td>{@code DockerDriver.SUPERVISOR_PIDS}</td><td>512</td><td>the supervisor cannot start threads</td></tr>
 * <tr><td>{@code DockerDriver.SUPERVISOR_TMP_BYTES}</td><td>64 MiB of /tmp</td><td>ENOSPC in the supervisor</td></tr>
 * <tr><td>{@code DockerDriver.WATCH_INTERVAL} + {@code STOP_GRACE_SECONDS}</td><td>1 s + 1 s</td><td>a supervisor gone stops the workload (and a workload ended its supervisor) within this, plus engine latency</td></tr>
 * <tr><td>{@code DockerDriver.RUNTIME_VERDICT_WAIT}</td><td>120 s</td><td>create FAILED, everything removed</td></tr>
 * <tr><td>{@code DockerDriver.MAX_LOG_BYTES}</td><td>64 KiB</td><td>of a container's log read for a verdict or last words</td></tr>
 * </table>
 */
module openshell.driver.docker {
    requires openshell.driver.container;
    requires com.github.dockerjava.api;
    requires com.github.dockerjava.core;
    requires com.github.dockerjava.transport;
    requires com.github.dockerjava.transport.zerodep;
    // Loaded by docker-java's automatic modules (which cannot say so).
    requires com.fasterxml.jackson.databind;
    requires org.slf4j;
    requires org.apache.commons.io;
    requires org.apache.commons.compress;
    requires org.apache.commons.lang3;
    requires com.sun.jna;

    provides openshell.driver.spi.ComputeDriverProvider with openshell.driver.docker.DockerDriverProvider;
}
