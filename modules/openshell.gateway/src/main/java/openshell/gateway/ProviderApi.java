package openshell.gateway;

import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;

import io.helidon.http.Status;
import io.helidon.webserver.http.HttpRouting;
import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonException;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import jakarta.json.JsonString;
import openshell.gateway.store.ProviderRecord;
import openshell.gateway.store.ProviderStore;

/**
 * {@code /v1/providers}: named secrets bound to hosts. A value goes in once, with create, and
 * never comes out of the API again.
 */
final class ProviderApi {
    private ProviderApi() {
    }

    static void routing(HttpRouting.Builder r, ProviderStore providers) {
        r.get("/v1/providers", (req, res) -> GatewayServer.guarded(res, () -> {
            JsonArrayBuilder items = Json.createArrayBuilder();
            providers.list().forEach(p -> items.add(json(p)));
            GatewayServer.send(res, Status.OK_200, Json.createObjectBuilder().add("providers", items).build());
        }));
        r.post("/v1/providers", (req, res) -> {
            String body = req.content().as(String.class);
            GatewayServer.guarded(res, () -> {
                JsonObject in = parse(body);
                byte[] value = string(in, "value").getBytes(StandardCharsets.UTF_8);
                try {
                    ProviderRecord record = new ProviderRecord(string(in, "name"), string(in, "env"), hosts(in),
                            Instant.ofEpochMilli(Instant.now().toEpochMilli()));
                    GatewayServer.send(res, Status.CREATED_201, json(providers.create(record, value)));
                } finally {
                    Arrays.fill(value, (byte) 0);
                }
            });
        });
        r.delete("/v1/providers/{name}", (req, res) -> GatewayServer.guarded(res, () -> {
            String name = req.path().pathParameters().get("name");
            if (!providers.delete(name)) {
                throw new GatewayException(GatewayException.Reason.NOT_FOUND, "no provider named '" + name + "'");
            }
            res.status(Status.NO_CONTENT_204).send();
        }));
    }

    static JsonObject json(ProviderRecord p) {
        JsonArrayBuilder hosts = Json.createArrayBuilder();
        p.hosts().forEach(hosts::add);
        return Json.createObjectBuilder().add("name", p.name()).add("env", p.envVar()).add("hosts", hosts)
                .add("placeholder", p.placeholder()).add("createdAt", p.createdAt().toString()).build();
    }

    private static JsonObject parse(String body) {
        try (JsonReader reader = Json.createReader(new StringReader(body))) {
            return reader.readObject();
        } catch (JsonException | IllegalStateException e) {
            throw new GatewayException(GatewayException.Reason.INVALID, "the body must be a JSON object");
        }
    }

    private static String string(JsonObject in, String key) {
        if (!(in.get(key) instanceof JsonString s)) {
            throw new GatewayException(GatewayException.Reason.INVALID, "'" + key + "' must be a string");
        }
        return s.getString();
    }

    private static List<String> hosts(JsonObject in) {
        try {
            return in.getJsonArray("hosts").getValuesAs(JsonString.class).stream().map(JsonString::getString).toList();
        } catch (RuntimeException e) {
            throw new GatewayException(GatewayException.Reason.INVALID, "'hosts' must be an array of strings");
        }
    }
}
