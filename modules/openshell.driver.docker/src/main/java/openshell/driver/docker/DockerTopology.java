package openshell.driver.docker;

import static openshell.driver.StateProperties.required;

import java.util.Properties;
import java.util.regex.Pattern;

import openshell.driver.DialDirection;
import openshell.driver.DriverException;
import openshell.driver.StateProperties;
import openshell.isolation.BackendKey;
import openshell.isolation.TopologyDescriptor;

/**
 * What the Docker driver provisioned for one launch, in two forms: the topology descriptor the
 * supervisor's backend reads (the channel as the supervisor sees it, who dials, whose uid the
 * runtime's peer must have) and the driver's state the gateway persists (which containers and
 * volume are the sandbox's, for which generation, in which namespace, and who dials: a restarted
 * sandbox keeps the direction recorded here, whatever the setting says now).
 *
 * @param namespace     the owner namespace (labels, names)
 * @param generation    the launch's generation (the generation marker on both containers)
 * @param workloadId    the workload container
 * @param supervisorId  the supervisor container
 * @param channelVolume the channel volume
 * @param imageId       the workload image, pinned by id
 * @param uid           the workload's uid (the runtime's, as the supervisor checks it)
 * @param gid           the workload's gid
 * @param direction     who dials
 */
record DockerTopology(String namespace, long generation, String workloadId, String supervisorId, String channelVolume,
                      String imageId, int uid, int gid, DialDirection direction) {
    /** The backend that attaches Docker topologies: the sandbox runtime, protocol version 1. */
    static final BackendKey BACKEND = new BackendKey("openshell-sandbox", 1);
    /** Where the channel volume is mounted in both containers. */
    static final String CHANNEL_MOUNT = "/.openshell/channel";
    /**
     * The channel volume's directory the two share: owned by the supervisor's user and the
     * workload's group, 1770, so both make their sockets in it and neither removes the other's.
     */
    static final String CHANNEL_DIR = "link";
    /** The socket the supervisor listens on (runtime-initiated); the runtime keeps its own directory beside it. */
    static final String CHANNEL_SOCKET = CHANNEL_MOUNT + "/" + CHANNEL_DIR + "/supervisor.sock";
    private static final Pattern ID = Pattern.compile("[0-9a-f]{64}");

    DockerTopology {
        if (!ID.matcher(workloadId).matches() || !ID.matcher(supervisorId).matches()) {
            throw new IllegalArgumentException("container ids must be 64 hex characters");
        }
        if (generation < 1) {
            throw new IllegalArgumentException("generation must be positive");
        }
    }

    /** @return the descriptor: only what the supervisor's backend needs */
    TopologyDescriptor descriptor() {
        Properties p = new Properties();
        p.setProperty("transport", "unix");
        p.setProperty("channel", CHANNEL_SOCKET);
        p.setProperty("dial", dial(direction));
        p.setProperty("runtime.uid", Integer.toString(uid));
        return TopologyDescriptor.of(BACKEND, StateProperties.write(p));
    }

    /** @return the driver's state for the gateway to persist */
    byte[] state() {
        Properties p = new Properties();
        p.setProperty("driver", DockerDriver.NAME);
        p.setProperty("namespace", namespace);
        p.setProperty("generation", Long.toString(generation));
        p.setProperty("workload", workloadId);
        p.setProperty("supervisor", supervisorId);
        p.setProperty("channel.volume", channelVolume);
        p.setProperty("image", imageId);
        p.setProperty("uid", Integer.toString(uid));
        p.setProperty("gid", Integer.toString(gid));
        p.setProperty("dial", dial(direction));
        return StateProperties.write(p);
    }

    static DockerTopology fromState(byte[] state) {
        try {
            Properties p = StateProperties.read(state);
            if (!DockerDriver.NAME.equals(p.getProperty("driver"))) {
                throw new IllegalArgumentException("written by another driver");
            }
            String dial = required(p, "dial");
            DialDirection direction = switch (dial) {
                case "runtime" -> DialDirection.RUNTIME_INITIATED;
                case "supervisor" -> DialDirection.SUPERVISOR_INITIATED;
                default -> throw new IllegalArgumentException("unknown dial " + dial);
            };
            return new DockerTopology(required(p, "namespace"), Long.parseLong(required(p, "generation")),
                    required(p, "workload"), required(p, "supervisor"), required(p, "channel.volume"), required(p, "image"),
                    Integer.parseInt(required(p, "uid")), Integer.parseInt(required(p, "gid")), direction);
        } catch (RuntimeException e) {
            throw new DriverException(DriverException.Kind.INVALID, "not a Docker-driver state: " + e.getMessage(), e);
        }
    }

    private static String dial(DialDirection d) {
        return d == DialDirection.RUNTIME_INITIATED ? "runtime" : "supervisor";
    }
}
