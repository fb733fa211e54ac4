package openshell.driver.container;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The labels on every object a container driver makes. {@link #MANAGED_BY} marks what the driver
 * may sweep or adopt; the sandbox id and namespace say whose it is; the role says what it is. An
 * object without them is never touched.
 */
public final class Labels {
    /** Marks an object this project made. */
    public static final String MANAGED_BY = "openshell.ai/managed-by";
    /** The value of {@link #MANAGED_BY}. */
    public static final String MANAGER = "openshell";
    /** The sandbox the object belongs to. */
    public static final String SANDBOX_ID = "openshell.ai/sandbox-id";
    /** The gateway namespace (owner) the sandbox belongs to. */
    public static final String NAMESPACE = "openshell.ai/sandbox-namespace";
    /** The owner: the driver instance's namespace, the same value as {@link #NAMESPACE} today. */
    public static final String OWNER = "openshell.ai/owner";
    /** The isolation backend the workload runs. */
    public static final String BACKEND = "openshell.ai/isolation-backend";
    /** What the object is: one of the {@link Role} values. */
    public static final String ROLE = "openshell.ai/isolation-role";
    /** The launch generation a container was made for (the generation marker). */
    public static final String GENERATION = "openshell.ai/runtime-generation";

    /** What an object is to its sandbox. */
    public enum Role {
        /** The workload container (runs the sandbox runtime). */
        SANDBOX,
        /** The companion supervisor container. */
        SUPERVISOR,
        /** A container made only to upload an archive into a volume; never started. */
        STAGING,
        /** A container made only to read the image's account files; never started. */
        IDENTITY,
        /** The channel volume shared by the workload and its supervisor. */
        CHANNEL;

        /** @return the label value */
        public String value() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    private Labels() {
    }

    /**
     * @param names the sandbox's names
     * @param role  what the object is
     * @param backend the isolation backend name (e.g. {@code openshell-sandbox})
     * @return the labels for it
     */
    public static Map<String, String> of(ContainerNames names, Role role, String backend) {
        Objects.requireNonNull(role, "role");
        Map<String, String> m = new LinkedHashMap<>();
        m.put(MANAGED_BY, MANAGER);
        m.put(SANDBOX_ID, names.id().value());
        m.put(NAMESPACE, names.namespace());
        m.put(OWNER, names.namespace());
        m.put(BACKEND, Objects.requireNonNull(backend, "backend"));
        m.put(ROLE, role.value());
        return Map.copyOf(m);
    }

    /**
     * @param labels an object's labels as the engine reports them (null for none)
     * @param names  the sandbox
     * @return whether the object is this project's and belongs to exactly that sandbox and namespace
     */
    public static boolean ownedBy(Map<String, String> labels, ContainerNames names) {
        return labels != null && MANAGER.equals(labels.get(MANAGED_BY))
                && names.id().value().equals(labels.get(SANDBOX_ID))
                && names.namespace().equals(labels.get(NAMESPACE));
    }

    /**
     * @param labels an object's labels (null for none)
     * @return whether any sandbox of this project owns it
     */
    public static boolean managed(Map<String, String> labels) {
        return labels != null && MANAGER.equals(labels.get(MANAGED_BY));
    }
}
