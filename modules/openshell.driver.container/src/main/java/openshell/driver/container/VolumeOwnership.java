package openshell.driver.container;

import java.util.Map;
import java.util.Objects;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * Who may mount which volume. A sandbox's channel volume carries its id and namespace in labels,
 * and only that sandbox's two containers mount it; names are predictable, so a name alone proves
 * nothing. A volume the operator names for a workspace must be nobody's: a managed volume (any
 * sandbox's channel) or a name in the channel volumes' pattern is refused before anything is made.
 */
public final class VolumeOwnership {
    /** The only volume driver a channel volume may have. */
    public static final String LOCAL = "local";

    private VolumeOwnership() {
    }

    /**
     * What an engine says of a volume.
     *
     * @param name    its name
     * @param driver  its driver
     * @param options its driver options (empty for none)
     * @param labels  its labels (empty for none)
     */
    public record VolumeFacts(String name, String driver, Map<String, String> options, Map<String, String> labels) {
        /** Copies; null maps become empty. */
        public VolumeFacts {
            Objects.requireNonNull(name, "name");
            driver = driver == null ? "" : driver;
            options = options == null ? Map.of() : Map.copyOf(options);
            labels = labels == null ? Map.of() : Map.copyOf(labels);
        }
    }

    /**
     * Checks a channel volume after create (or before reuse): local, no options, labelled for
     * exactly this sandbox.
     *
     * @param v     the volume as inspected
     * @param names the sandbox
     * @throws DriverException FAILED naming what is wrong
     */
    public static void requireChannel(VolumeFacts v, ContainerNames names) {
        if (!v.name().equals(names.channelVolume())) {
            throw new DriverException(Kind.FAILED, "volume " + v.name() + " is not sandbox " + names.id()
                    + "'s channel volume " + names.channelVolume());
        }
        if (!LOCAL.equals(v.driver()) || !v.options().isEmpty()) {
            throw new DriverException(Kind.FAILED, "channel volume " + v.name() + " has driver '" + v.driver()
                    + "' and options " + v.options().keySet() + "; only a local volume without options is used");
        }
        if (!Labels.ownedBy(v.labels(), names) || !Labels.Role.CHANNEL.value().equals(v.labels().get(Labels.ROLE))) {
            throw new DriverException(Kind.FAILED, "channel volume " + v.name() + " is not labelled for sandbox "
                    + names.id() + " in namespace " + names.namespace() + " (labels " + v.labels() + ")");
        }
    }

    /**
     * Admits a volume the operator's options name for a sandbox (its workspace).
     *
     * @param volume the name given
     * @param facts  the volume as inspected, if it exists
     * @throws DriverException INVALID if it is a sandbox's channel volume or any managed volume
     */
    public static void admitUserVolume(String volume, java.util.Optional<VolumeFacts> facts) {
        Objects.requireNonNull(volume, "volume");
        if (volume.startsWith(ContainerNames.CHANNEL_PREFIX)) {
            throw new DriverException(Kind.INVALID, "volume " + volume + " is named like a sandbox's channel volume;"
                    + " a sandbox never mounts another's channel");
        }
        facts.ifPresent(f -> {
            if (Labels.managed(f.labels())) {
                throw new DriverException(Kind.INVALID, "volume " + volume + " belongs to sandbox "
                        + f.labels().getOrDefault(Labels.SANDBOX_ID, "?") + " (" + f.labels().getOrDefault(Labels.ROLE, "?")
                        + "); a sandbox never mounts a volume the driver made for another");
            }
        });
    }
}
