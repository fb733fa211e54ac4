package openshell.gateway;

import java.io.StringWriter;
import java.util.List;
import java.util.Optional;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonWriter;
import openshell.gateway.store.SandboxFailure;
import openshell.gateway.store.SandboxRecord;

/** JSON bodies of the REST API. Nothing secret is ever part of one. */
final class JsonBodies {
    private JsonBodies() {
    }

    static JsonObject sandbox(SandboxRecord r) {
        return sandbox(r, Optional.empty());
    }

    /** A sandbox with why and when it failed, if the gateway recorded that. */
    static JsonObject sandbox(SandboxRecord r, Optional<SandboxFailure> failure) {
        JsonObjectBuilder b = Json.createObjectBuilder()
                .add("id", r.id().value())
                .add("name", r.name())
                .add("driver", r.driver())
                .add("state", r.state().name())
                .add("backend", r.descriptor().backend().toString())
                .add("dialDirection", r.provisioned().direction().name())
                .add("runtimeGeneration", r.runtimeGeneration())
                .add("credentialEpoch", r.credentialEpoch())
                .add("policyGeneration", r.policyGeneration())
                .add("createdAt", r.createdAt().toString())
                .add("updatedAt", r.updatedAt().toString());
        failure.ifPresent(f -> b.add("failedAt", f.failedAt().toString()).add("failureCause", f.cause()));
        return b.build();
    }

    static JsonObject sandboxes(List<SandboxRecord> records) {
        JsonArrayBuilder items = Json.createArrayBuilder();
        records.forEach(r -> items.add(sandbox(r)));
        return Json.createObjectBuilder().add("sandboxes", items).build();
    }

    static JsonObject error(String reason, String message) {
        return Json.createObjectBuilder().add("error", reason).add("message", message).build();
    }

    static JsonObject status(String status) {
        return Json.createObjectBuilder().add("status", status).build();
    }

    static String write(JsonObject object) {
        StringWriter out = new StringWriter();
        try (JsonWriter w = Json.createWriter(out)) {
            w.writeObject(object);
        }
        return out.toString();
    }
}
