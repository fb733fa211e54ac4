package openshell.driver.container;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Objects;

import openshell.driver.DriverException;
import openshell.isolation.SandboxId;

/**
 * The names of one sandbox's container objects. Names are predictable on purpose (adoption after a
 * gateway restart finds them), which is why they never prove ownership: labels and
 * {@link VolumeOwnership} do.
 *
 * @param namespace the gateway namespace the sandbox belongs to, sanitised
 * @param id        the sandbox
 */
public record ContainerNames(String namespace, SandboxId id) {
    /** Longest container name; only the namespace part is shortened to fit. */
    public static final int MAX_NAME_CHARS = 200;
    /** Hex characters of sha256(namespace NUL id) in a volume's name. */
    public static final int VOLUME_HASH_CHARS = 32;
    /** Every name starts so. */
    public static final String PREFIX = "openshell-";
    /** The channel volume's name prefix. */
    public static final String CHANNEL_PREFIX = PREFIX + "channel-";
    private static final String SUPERVISOR_SUFFIX = "-supervisor";
    private static final String STAGING_SUFFIX = "-stage";

    /** Sanitises the namespace: what an engine accepts in a name ({@code [a-zA-Z0-9][a-zA-Z0-9_.-]*}). */
    public ContainerNames {
        Objects.requireNonNull(id, "id");
        namespace = sanitise(Objects.requireNonNull(namespace, "namespace"));
    }

    /** @return the workload container's name: {@code openshell-<namespace>--<id>} */
    public String workload() {
        // The longest suffix (supervisor staging) must still fit.
        int room = MAX_NAME_CHARS - PREFIX.length() - 2 - id.value().length() - SUPERVISOR_SUFFIX.length()
                - STAGING_SUFFIX.length();
        String ns = namespace.length() > room ? namespace.substring(0, room) : namespace;
        return PREFIX + ns + "--" + id.value();
    }

    /** @return the companion supervisor container's name */
    public String supervisor() {
        return workload() + SUPERVISOR_SUFFIX;
    }

    /** @return the staging container's name (created to upload an archive into a volume, never started) */
    public String staging() {
        return supervisor() + STAGING_SUFFIX;
    }

    /** @return the channel volume's name: {@code openshell-channel-<first 32 hex of sha256(namespace NUL id)>} */
    public String channelVolume() {
        return CHANNEL_PREFIX + hash(namespace, id);
    }

    static String hash(String namespace, SandboxId id) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(namespace.getBytes(StandardCharsets.UTF_8));
            sha.update((byte) 0);
            sha.update(id.value().getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(sha.digest()).substring(0, VOLUME_HASH_CHARS);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }

    /**
     * @param value a namespace as configured
     * @return it with every character an engine refuses in a name replaced by {@code -}; a
     *         leading non-alphanumeric is dropped
     * @throws DriverException INVALID if nothing usable is left
     */
    static String sanitise(String value) {
        StringBuilder b = new StringBuilder(value.length());
        for (char c : value.toCharArray()) {
            boolean alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            if (b.isEmpty() && !alnum) {
                continue;
            }
            b.append(alnum || c == '_' || c == '.' ? c : '-');
        }
        // "--" separates the namespace from the id: a namespace never holds it, so a name splits one way.
        String s = b.toString().replaceAll("-{2,}", "-");
        if (s.isEmpty()) {
            throw new DriverException(DriverException.Kind.INVALID, "the namespace '" + value
                    + "' has no character a container name may hold");
        }
        return s;
    }
}
