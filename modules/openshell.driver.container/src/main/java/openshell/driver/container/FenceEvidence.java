package openshell.driver.container;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * What an engine's inspect says about a workload container's outer fence, projected so any
 * container driver can check it the same way. The fence is verified, never assumed: a driver
 * checks it after create, at every start and at every status poll, and stops the workload on a
 * violation.
 *
 * @param containerId  the container inspected
 * @param networkMode  {@code HostConfig.NetworkMode}
 * @param networks     the names under {@code NetworkSettings.Networks}
 * @param capAdd       {@code HostConfig.CapAdd}
 * @param capDrop      {@code HostConfig.CapDrop}
 * @param privileged   {@code HostConfig.Privileged}
 * @param securityOpt  {@code HostConfig.SecurityOpt}
 */
public record FenceEvidence(String containerId, String networkMode, List<String> networks, List<String> capAdd,
                            List<String> capDrop, boolean privileged, List<String> securityOpt) {
    /** The only network mode a workload may have. */
    public static final String NONE = "none";

    /** Copies; null lists (an engine omits empty ones) become empty. */
    public FenceEvidence {
        Objects.requireNonNull(containerId, "containerId");
        networkMode = networkMode == null ? "" : networkMode;
        networks = copy(networks);
        capAdd = copy(capAdd);
        capDrop = copy(capDrop);
        securityOpt = copy(securityOpt);
    }

    private static List<String> copy(List<String> list) {
        return list == null ? List.of() : list.stream().filter(Objects::nonNull).toList();
    }

    /** @return every way the fence is broken, empty if it holds */
    public List<String> violations() {
        List<String> v = new ArrayList<>();
        if (!NONE.equals(networkMode)) {
            v.add("network mode is '" + networkMode + "', not none");
        }
        List<String> others = networks.stream().filter(n -> !NONE.equals(n)).toList();
        if (!others.isEmpty()) {
            v.add("connected to network(s) " + others);
        }
        if (!capAdd.isEmpty()) {
            v.add("capabilities added: " + capAdd);
        }
        if (capDrop.stream().noneMatch(c -> c.equalsIgnoreCase("ALL") || c.equalsIgnoreCase("CAP_ALL"))) {
            v.add("capabilities not all dropped (CapDrop " + capDrop + ")");
        }
        if (privileged) {
            v.add("privileged");
        }
        if (securityOpt.stream().noneMatch(FenceEvidence::noNewPrivileges)) {
            v.add("no-new-privileges not set");
        }
        securityOpt.stream().filter(FenceEvidence::unconfined).forEach(o -> v.add("security option " + o));
        return List.copyOf(v);
    }

    /** @return the violations as one sentence, empty if the fence holds */
    public String reason() {
        List<String> v = violations();
        return v.isEmpty() ? "" : "outer fence violated on container " + shortId() + ": " + String.join("; ", v);
    }

    private String shortId() {
        return containerId.length() > 12 ? containerId.substring(0, 12) : containerId;
    }

    private static boolean noNewPrivileges(String o) {
        String s = o.toLowerCase(Locale.ROOT).replace('=', ':');
        return s.equals("no-new-privileges") || s.equals("no-new-privileges:true");
    }

    private static boolean unconfined(String o) {
        String s = o.toLowerCase(Locale.ROOT).replace('=', ':');
        return s.startsWith("seccomp:") && s.substring("seccomp:".length()).equals("unconfined")
                || s.startsWith("apparmor:") && s.substring("apparmor:".length()).equals("unconfined")
                || s.equals("no-new-privileges:false");
    }
}
