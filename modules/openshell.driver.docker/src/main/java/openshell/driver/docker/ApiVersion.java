package openshell.driver.docker;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * An Engine API version ({@code 1.41}), and the negotiation: the daemon's own version, capped at
 * the newest this driver knows; a daemon older than {@link #MINIMUM} is refused naming both.
 *
 * @param major the major number
 * @param minor the minor number
 */
record ApiVersion(int major, int minor) implements Comparable<ApiVersion> {
    /** The oldest Engine API the driver speaks (Docker 20.10). */
    static final ApiVersion MINIMUM = new ApiVersion(1, 41);
    /** The newest Engine API whose fields the driver knows; a newer daemon is spoken to at this version. */
    static final ApiVersion NEWEST = new ApiVersion(1, 45);
    /** {@code HealthConfig.StartInterval} exists from here on. */
    static final ApiVersion HEALTH_START_INTERVAL = new ApiVersion(1, 44);

    static ApiVersion parse(String text) {
        String[] parts = text == null ? new String[0] : text.trim().split("\\.");
        try {
            if (parts.length == 2) {
                return new ApiVersion(Integer.parseInt(parts[0]), Integer.parseInt(parts[1]));
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new DriverException(Kind.UNAVAILABLE, "the Docker Engine reports an API version that is not one: '" + text + "'");
    }

    /**
     * @param daemon the daemon's API version
     * @param host   where it was asked, for the message
     * @return the version to speak
     * @throws DriverException UNAVAILABLE naming both versions if the daemon is older than {@link #MINIMUM}
     */
    static ApiVersion negotiate(ApiVersion daemon, String host) {
        if (daemon.compareTo(MINIMUM) < 0) {
            throw new DriverException(Kind.UNAVAILABLE, "the Docker Engine at " + host + " speaks API " + daemon
                    + ", older than the " + MINIMUM + " the Docker driver needs (Docker 20.10 or newer)");
        }
        return daemon.compareTo(NEWEST) > 0 ? NEWEST : daemon;
    }

    @Override
    public int compareTo(ApiVersion o) {
        return major != o.major ? Integer.compare(major, o.major) : Integer.compare(minor, o.minor);
    }

    @Override
    public String toString() {
        return major + "." + minor;
    }
}
