package openshell.driver.container;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.isolation.WorkloadIdentity;
import openshell.policy.AccountRef;
import openshell.policy.Policy;
import openshell.policy.PolicyException;

/**
 * The identity a container workload runs as, resolved from the policy's {@code process} section
 * and the pinned image's own {@code /etc/passwd} and {@code /etc/group} (read out of a container
 * that is created and never started, so no image code runs). The policy's user wins; else the
 * image's {@code USER}; else {@link #DEFAULT_ID}. Root, as a user or as the primary group, is
 * refused whichever names it; a supplementary group 0 is never added.
 *
 * @param uid    the user id
 * @param gid    the primary group id
 * @param groups supplementary groups from the image's group file
 * @param source where the user came from
 */
public record ImageIdentity(int uid, int gid, List<Integer> groups, Source source) {
    /** The uid and gid of a workload neither the policy nor the image names a user for. */
    public static final int DEFAULT_ID = 1000;
    /** Largest passwd or group file read. */
    public static final int MAX_ACCOUNT_FILE_BYTES = 1024 * 1024;

    /** Where the user came from. */
    public enum Source {
        /** The policy's {@code process.run_as_user}. */
        POLICY,
        /** The image's {@code USER}. */
        IMAGE,
        /** Neither named one. */
        DEFAULT
    }

    /** Validates: never root. */
    public ImageIdentity {
        Objects.requireNonNull(source, "source");
        groups = List.copyOf(groups);
        if (uid <= 0 || gid <= 0) {
            throw new DriverException(Kind.INVALID, "the workload would run as " + (uid <= 0 ? "uid " + uid : "gid " + gid)
                    + " (from the " + source.name().toLowerCase(java.util.Locale.ROOT) + "): a workload never runs as root;"
                    + " name a non-root user in the policy's process.run_as_user or the image's USER");
        }
    }

    /** @return the identity the isolation contract carries */
    public WorkloadIdentity workload() {
        return new WorkloadIdentity(uid, gid, groups.stream().limit(WorkloadIdentity.MAX_GROUPS).toList());
    }

    /** @return {@code uid:gid}, an engine's {@code User} */
    public String user() {
        return uid + ":" + gid;
    }

    /**
     * @param policyDocument the sandbox's admitted policy (YAML)
     * @param imageUser      the image's {@code Config.User} (empty for none)
     * @param passwd         the image's {@code /etc/passwd}, if it has one
     * @param group          the image's {@code /etc/group}, if it has one
     * @return the identity
     * @throws DriverException INVALID if it is root or names an account the image does not have
     */
    public static ImageIdentity resolve(String policyDocument, String imageUser, Optional<String> passwd,
                                        Optional<String> group) {
        Policy policy;
        try {
            policy = Policy.parse(policyDocument);
        } catch (PolicyException e) {
            throw new DriverException(Kind.INVALID, "the sandbox's policy does not parse: " + e.getMessage(), e);
        }
        Optional<String> user = policy.process().runAsUser().map(ImageIdentity::written);
        Optional<String> grp = policy.process().runAsGroup().map(ImageIdentity::written);
        return resolve(user, grp, imageUser, passwd, group);
    }

    /**
     * @param policyUser  the policy's run_as_user as written, if any
     * @param policyGroup the policy's run_as_group as written, if any
     * @param imageUser   the image's {@code Config.User} ({@code user}, {@code user:group}, numeric or named; empty for none)
     * @param passwd      the image's passwd file
     * @param group       the image's group file
     * @return the identity
     */
    static ImageIdentity resolve(Optional<String> policyUser, Optional<String> policyGroup, String imageUser,
                                 Optional<String> passwd, Optional<String> group) {
        passwd.ifPresent(p -> bounded(p, "/etc/passwd"));
        group.ifPresent(g -> bounded(g, "/etc/group"));
        Source source;
        String user;
        Optional<String> grp;
        if (policyUser.isPresent()) {
            source = Source.POLICY;
            user = policyUser.get();
            grp = policyGroup;
        } else if (imageUser != null && !imageUser.isBlank()) {
            source = Source.IMAGE;
            int colon = imageUser.indexOf(':');
            user = colon < 0 ? imageUser.trim() : imageUser.substring(0, colon).trim();
            grp = policyGroup.or(() -> colon < 0 ? Optional.empty() : Optional.of(imageUser.substring(colon + 1).trim()));
        } else {
            List<Integer> none = List.of();
            int gid = policyGroup.map(g -> groupId(g, group, Source.DEFAULT)).orElse(DEFAULT_ID);
            return new ImageIdentity(DEFAULT_ID, gid, none, Source.DEFAULT);
        }
        Optional<String[]> entry = numeric(user) ? passwd.flatMap(p -> find(p, 2, user)) : passwd.flatMap(p -> find(p, 0, user));
        int uid;
        if (numeric(user)) {
            uid = parse(user, source);
        } else {
            uid = entry.map(e -> parse(e[2], source)).orElseThrow(() -> new DriverException(Kind.INVALID, "the "
                    + where(source) + " names the user '" + user + "', which the image's /etc/passwd does not have"));
        }
        int gid = grp.map(g -> groupId(g, group, source))
                .orElseGet(() -> entry.map(e -> parse(e[3], source)).orElse(uid));
        String name = entry.map(e -> e[0]).orElse(null);
        List<Integer> groups = new ArrayList<>();
        if (name != null && group.isPresent()) {
            for (String line : group.get().split("\n")) {
                String[] f = line.split(":", -1);
                if (f.length >= 4 && numeric(f[2]) && List.of(f[3].split(",")).contains(name)) {
                    int g = parse(f[2], source);
                    if (g > 0 && g != gid && !groups.contains(g)) {
                        groups.add(g);
                    }
                }
            }
        }
        return new ImageIdentity(uid, gid, groups, source);
    }

    private static int groupId(String g, Optional<String> group, Source source) {
        if (numeric(g)) {
            return parse(g, source);
        }
        return group.flatMap(text -> find(text, 0, g)).map(e -> parse(e[2], source))
                .orElseThrow(() -> new DriverException(Kind.INVALID, "the " + where(source) + " names the group '" + g
                        + "', which the image's /etc/group does not have"));
    }

    private static Optional<String[]> find(String file, int field, String value) {
        for (String line : file.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split(":", -1);
            if (f.length > Math.max(field, 3) && f[field].equals(value)) {
                return Optional.of(f);
            }
        }
        return Optional.empty();
    }

    private static void bounded(String text, String what) {
        if (text.length() > MAX_ACCOUNT_FILE_BYTES) {
            throw new DriverException(Kind.INVALID, "the image's " + what + " is larger than " + MAX_ACCOUNT_FILE_BYTES
                    + " bytes");
        }
    }

    private static String where(Source source) {
        return source == Source.POLICY ? "policy's process section" : "image's USER";
    }

    private static boolean numeric(String s) {
        return !s.isEmpty() && s.length() <= 10 && s.chars().allMatch(Character::isDigit);
    }

    private static int parse(String s, Source source) {
        try {
            return Integer.parseInt(s.trim());
        } catch (NumberFormatException e) {
            throw new DriverException(Kind.INVALID, "the " + where(source) + " resolves to an id that is not a number: " + s);
        }
    }

    private static String written(AccountRef ref) {
        return switch (ref) {
            case AccountRef.Id id -> Integer.toString(id.value());
            case AccountRef.Name name -> name.value();
        };
    }
}
