/**
 * The embedded default compute driver: the sandbox runtime runs as a host process tree in fresh
 * user, net, mount, pid, ipc and uts namespaces, the supervisor as an ordinary host process, and
 * the two meet on a Unix socket in a private 0700 directory.
 *
 * <h2>How the namespaces are made</h2>
 * A JVM is always multithreaded, and the kernel refuses {@code unshare(CLONE_NEWUSER)} and
 * {@code setns} into a user or mount namespace to multithreaded callers. So the driver uses the
 * host's util-linux: {@code unshare} starts a namespace holder (PID 1 of the new pid namespace),
 * the driver writes the holder's uid and gid maps from outside (a private host id range per
 * sandbox, so two sandboxes never share an identity), and {@code nsenter} starts the sandbox
 * runtime inside, as the namespace's root. Killing the holder makes the kernel kill every process
 * of the pid namespace: cleanup needs neither the supervisor nor the runtime.
 *
 * <h2>Cleanup and gateway restarts</h2>
 * Everything the driver needs to find a sandbox again is in the state the gateway persists (holder
 * and supervisor by pid and start time, slot, channel), and nothing of a sandbox is a child that dies
 * with the gateway: after a gateway restart, stop and delete reach the same processes. Delete kills the
 * supervisor (if it still runs), the holder (and with it the whole pid namespace) and the sandbox's
 * cgroup, then removes its run directory and socket, its state, its fresh workspace and its id-range
 * slot, whether or not the supervisor is alive. Slots are one directory per host ({@code id.slots},
 * default {@code /var/lib/openshell/id-slots}), not per gateway state: two gateways on one host with
 * different homes must never hand two sandboxes one uid range.
 *
 * <h2>What each program receives</h2>
 * Both launchers get {@code --sandbox ID --generation N --channel SOCKET --bundle-stdin}; the
 * supervisor also {@code --runtime-uid UID} and {@code --runtime-pid PID} (the peer it must accept on
 * the channel: that uid, and a process under the one the driver started for the runtime, which is
 * why the runtime starts first and redials until the supervisor listens), the runtime
 * {@code --workspace DIR}: the one the user gave, or else a fresh one the driver makes under its
 * {@code workspace.root} setting and removes on delete (never in the host's shared {@code /tmp}, where
 * nothing would ever remove it). The launch bundle is the whole of standard input; it is
 * never a file or an argument. The supervisor listens on {@code SOCKET}, inside a 0700 directory
 * owned by the sandbox's mapped root; the runtime dials it.
 *
 * <h2>Warm spares</h2>
 * With the setting {@code spares=N} the driver keeps N holders, runtimes and supervisors started
 * ahead of any sandbox ({@code SparePool}): both launchers get {@code --late-arguments} instead of
 * the sandbox, generation and workspace, start at niceness {@code SPARE_NICENESS} (19) so their
 * JVM starts yield to everything else, print that they wait, and are then put back to niceness 0.
 * A create takes the oldest idle spare: its logs, id-range slot and fresh workspace become the
 * sandbox's, every thread is put back to niceness 0, and the late arguments then the bundles go to
 * the two programs' standard input. The spare keeps its run directory and cgroup name (cgroup v2
 * renames nothing), both recorded in the state; a spare that died is removed and the create
 * launches cold. The next spare starts a second after the sandbox that took the last is ready. Closing the
 * driver removes idle spares; a pool on a state root first sweeps the spares a dead gateway left
 * there (by the topology file beside their logs, or without one by their id range's user
 * namespace). A spare holds no secret: bundles reach it only
 * when a sandbox takes it.
 *
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code NamespaceHolder.READY_TIMEOUT}</td><td>10 s</td><td>FAILED, holder killed</td></tr>
 * <tr><td>{@code NamespaceHolder.KILL_TIMEOUT}</td><td>10 s</td><td>FAILED, reported</td></tr>
 * <tr><td>{@code IdRange.SIZE}</td><td>65,536 ids</td><td>per sandbox</td></tr>
 * <tr><td>{@code IdRange.MAX_SLOTS}</td><td>50,277 sandboxes per host</td><td>UNAVAILABLE</td></tr>
 * <tr><td>{@code ProcessDriver.SUPERVISOR_KILL_TIMEOUT}</td><td>10 s</td><td>FAILED, reported</td></tr>
 * <tr><td>{@code ProcessDriver.RUNTIME_VERDICT_WAIT}</td><td>120 s for the runtime to serve or refuse after its bundle</td><td>create FAILED, everything removed (a refusal: INVALID with the runtime's reason)</td></tr>
 * <tr><td>{@code IdRange.SIZE} - 1</td><td>65,535: the highest workload uid or gid (run_as_user, run_as_group)</td><td>create refused (INVALID), nothing made</td></tr>
 * <tr><td>{@code ProcessDriver.MAX_SOCKET_PATH_BYTES}</td><td>106 bytes</td><td>create refused (INVALID), nothing made</td></tr>
 * <tr><td>{@code ProcessDriver.MAX_SPARES}</td><td>4 warm spares</td><td>the setting refused (INVALID)</td></tr>
 * <tr><td>{@code ProcessDriver.MAX_RENICE_PASSES}</td><td>5</td><td>FAILED: the claim is undone, the create launches cold</td></tr>
 * <tr><td>{@code SparePool.REFILL_WAIT}</td><td>10 s</td><td>the next spare starts although the last taken is not ready</td></tr>
 * <tr><td>{@code SparePool.REFILL_DELAY}</td><td>1 s</td><td>after the last taken is ready, before the next spare starts</td></tr>
 * <tr><td>{@code SparePool.SETTLE_WAIT}</td><td>30 s</td><td>a new spare is put back to niceness 0 anyway</td></tr>
 * <tr><td>{@code SparePool.FAILURE_BACKOFF}</td><td>30 s</td><td>after a spare failed to start, reported</td></tr>
 * <tr><td>{@code SparePool.MAX_LOG_READ}</td><td>64 KiB</td><td>of a log searched for a ready or waiting line</td></tr>
 * </table>
 */
module openshell.driver.process {
    requires openshell.driver;
    requires jakarta.json;

    provides openshell.driver.spi.ComputeDriverProvider with openshell.driver.process.ProcessDriverProvider;
}
