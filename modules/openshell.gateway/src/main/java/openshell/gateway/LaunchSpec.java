package openshell.gateway;

import java.io.StringReader;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonReader;
import jakarta.json.JsonString;
import jakarta.json.JsonValue;
import openshell.isolation.AgentSpec;

/**
 * What relaunching a sandbox needs beside its record: the agent, the workspace the operator chose,
 * the names of the attached providers and the image a container driver runs. Persisted as JSON;
 * it never holds a secret.
 *
 * @param agent     the agent program
 * @param workspace an absolute host directory (a container driver: a volume name), or empty for a fresh private one
 * @param providers names of the attached providers
 * @param image     the workload image a container driver runs (its {@code image} option), or empty
 */
record LaunchSpec(AgentSpec agent, String workspace, List<String> providers, String image) {
    /** Most providers one sandbox may attach. */
    static final int MAX_PROVIDERS = 32;

    LaunchSpec {
        Objects.requireNonNull(agent, "agent");
        Objects.requireNonNull(workspace, "workspace");
        Objects.requireNonNull(image, "image");
        providers = List.copyOf(providers);
        if (!workspace.isEmpty() && !Path.of(workspace).isAbsolute() && image.isEmpty()) {
            throw invalid("workspace must be an absolute directory: " + workspace);
        }
        if (providers.size() > MAX_PROVIDERS) {
            throw invalid("at most " + MAX_PROVIDERS + " providers per sandbox, got " + providers.size());
        }
    }

    /** @return the driver options this launch asks for */
    Map<String, String> driverOptions() {
        Map<String, String> options = new LinkedHashMap<>();
        if (!workspace.isEmpty()) {
            options.put("workspace", workspace);
        }
        // Only a container driver has the option; a driver without it refuses the launch by name.
        if (!image.isEmpty()) {
            options.put("image", image);
        }
        return Map.copyOf(options);
    }

    String toJson() {
        JsonArrayBuilder argv = Json.createArrayBuilder();
        agent.argv().forEach(argv::add);
        JsonObjectBuilder env = Json.createObjectBuilder();
        agent.environment().forEach(env::add);
        JsonArrayBuilder names = Json.createArrayBuilder();
        providers.forEach(names::add);
        return JsonBodies.write(Json.createObjectBuilder()
                .add("argv", argv).add("env", env).add("workingDirectory", agent.workingDirectory())
                .add("workspace", workspace).add("providers", names).add("image", image).build());
    }

    static LaunchSpec fromJson(String json) {
        try (JsonReader r = Json.createReader(new StringReader(json))) {
            return from(r.readObject());
        }
    }

    /**
     * Reads the request's fields: {@code agent} ({@code argv}, {@code env}, {@code workingDirectory}),
     * {@code workspace}, {@code providers} and {@code image}, or the stored form ({@code argv} etc. at the top).
     */
    static LaunchSpec from(JsonObject in) {
        JsonObject agent = in.containsKey("agent") ? object(in, "agent") : in;
        List<String> argv = strings(agent, "argv");
        if (argv.isEmpty()) {
            throw invalid("the agent's argv must name a program: \"agent\": {\"argv\": [\"/usr/bin/env\", ...]}");
        }
        Map<String, String> env = new LinkedHashMap<>();
        if (agent.containsKey("env")) {
            object(agent, "env").forEach((k, v) -> {
                if (!(v instanceof JsonString s)) {
                    throw invalid("agent env values must be strings: " + k);
                }
                env.put(k, s.getString());
            });
        }
        String cwd = text(agent, "workingDirectory", "/");
        AgentSpec spec;
        try {
            spec = new AgentSpec(argv, env, cwd);
        } catch (RuntimeException e) {
            throw invalid("invalid agent: " + e.getMessage());
        }
        return new LaunchSpec(spec, text(in, "workspace", ""), in.containsKey("providers") ? strings(in, "providers")
                : List.of(), text(in, "image", ""));
    }

    private static JsonObject object(JsonObject in, String key) {
        if (!(in.get(key) instanceof JsonObject o)) {
            throw invalid("'" + key + "' must be an object");
        }
        return o;
    }

    private static String text(JsonObject in, String key, String fallback) {
        JsonValue v = in.get(key);
        if (v == null || v == JsonValue.NULL) {
            return fallback;
        }
        if (!(v instanceof JsonString s)) {
            throw invalid("'" + key + "' must be a string");
        }
        return s.getString();
    }

    private static List<String> strings(JsonObject in, String key) {
        try {
            return in.getJsonArray(key).getValuesAs(JsonString.class).stream().map(JsonString::getString).toList();
        } catch (RuntimeException e) {
            throw invalid("'" + key + "' must be an array of strings");
        }
    }

    private static GatewayException invalid(String message) {
        return new GatewayException(GatewayException.Reason.INVALID, message);
    }
}
