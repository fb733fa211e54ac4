package openshell.driver.process;

import static openshell.driver.StateProperties.required;

import java.nio.file.Path;
import java.util.Optional;
import java.util.Properties;

import openshell.driver.DriverException;
import openshell.driver.StateProperties;
import openshell.isolation.BackendKey;
import openshell.isolation.TopologyDescriptor;

/**
 * What the process driver provisioned for one launch, in two forms: the topology descriptor the
 * supervisor's backend reads (where the channel is, whose credentials the runtime's peer must
 * have) and the driver's own state the gateway persists (which holder and supervisor to kill).
 *
 * @param channel        the Unix socket the supervisor listens on and the runtime dials
 * @param runtimeHostUid the host uid the sandbox runtime runs as (the sandbox's mapped root)
 * @param slot           the id-range slot
 * @param holderPid      PID 1 of the sandbox's namespaces, as the host sees it
 * @param holderStart    its start time, epoch milliseconds
 * @param supervisorPid  the supervisor process
 * @param supervisorStart its start time, epoch milliseconds
 * @param cgroup         the name of the sandbox's cgroup directory: {@code openshell-<id>}, or a
 *                       warm spare's, which keeps the name it was made with (cgroup v2 renames
 *                       nothing); states written before it was recorded name none, and mean the id's
 */
record ProcessTopology(Path channel, long runtimeHostUid, int slot, long holderPid, long holderStart,
                       long supervisorPid, long supervisorStart, Optional<String> cgroup) {
    /** The backend that attaches process topologies: the sandbox runtime, protocol version 1. */
    static final BackendKey BACKEND = new BackendKey("openshell-sandbox", 1);

    /** @return the descriptor: only what the supervisor's backend needs, nothing of the driver's */
    TopologyDescriptor descriptor() {
        Properties p = new Properties();
        p.setProperty("transport", "unix");
        p.setProperty("channel", channel.toString());
        p.setProperty("dial", "runtime");
        p.setProperty("runtime.uid", Long.toString(runtimeHostUid));
        return TopologyDescriptor.of(BACKEND, StateProperties.write(p));
    }

    /** @return the driver's state for the gateway to persist */
    byte[] state() {
        Properties p = new Properties();
        p.setProperty("channel", channel.toString());
        p.setProperty("runtime.uid", Long.toString(runtimeHostUid));
        p.setProperty("slot", Integer.toString(slot));
        p.setProperty("holder.pid", Long.toString(holderPid));
        p.setProperty("holder.start", Long.toString(holderStart));
        p.setProperty("supervisor.pid", Long.toString(supervisorPid));
        p.setProperty("supervisor.start", Long.toString(supervisorStart));
        cgroup.ifPresent(name -> p.setProperty("cgroup", name));
        return StateProperties.write(p);
    }

    static ProcessTopology fromState(byte[] state) {
        try {
            Properties p = StateProperties.read(state);
            return new ProcessTopology(Path.of(required(p, "channel")), Long.parseLong(required(p, "runtime.uid")),
                    Integer.parseInt(required(p, "slot")), Long.parseLong(required(p, "holder.pid")),
                    Long.parseLong(required(p, "holder.start")), Long.parseLong(required(p, "supervisor.pid")),
                    Long.parseLong(required(p, "supervisor.start")), Optional.ofNullable(p.getProperty("cgroup"))
                            .map(ProcessTopology::cgroupName));
        } catch (RuntimeException e) {
            throw new DriverException(DriverException.Kind.INVALID, "not a process-driver state: " + e.getMessage(), e);
        }
    }

    /** A cgroup directory name the driver could have made: one path element under its prefix. */
    private static String cgroupName(String name) {
        if (!name.startsWith(SandboxCgroup.PREFIX) || name.contains("/") || name.equals(".") || name.equals("..")) {
            throw new IllegalArgumentException("not a sandbox cgroup name: " + name);
        }
        return name;
    }
}
