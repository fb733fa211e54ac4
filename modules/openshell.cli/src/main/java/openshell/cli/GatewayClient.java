package openshell.cli;

import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;

import io.helidon.http.HeaderNames;
import io.helidon.http.Method;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;

/**
 * The gateway's REST API as the CLI sees it: the URL from {@code <state>/gateway.json}, the token
 * from {@code <state>/api-token}. The token is sent only to that URL and never printed.
 */
final class GatewayClient {
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    /** Read timeout of a streamed exec: the gateway sends a heartbeat line every 10 s of silence. */
    static final Duration STREAM_TIMEOUT = Duration.ofSeconds(60);
    /** Reply timeout of a policy set: the gateway waits up to 30 s for the supervisor's verdict. */
    static final Duration POLICY_TIMEOUT = Duration.ofSeconds(60);

    /** A reply: status and JSON body (empty object when there is none). */
    record Reply(int status, JsonObject body) {
    }

    private final WebClient client;
    private final WebClient streaming;
    private final String url;
    private final String token;

    private GatewayClient(String url, String token) {
        this.client = WebClient.builder().baseUri(url).readTimeout(POLICY_TIMEOUT).connectTimeout(Duration.ofSeconds(5))
                .build();
        this.streaming = WebClient.builder().baseUri(url).readTimeout(STREAM_TIMEOUT)
                .connectTimeout(Duration.ofSeconds(5)).build();
        this.url = url;
        this.token = token;
    }

    /**
     * Starts a streamed exec ({@code SandboxExec}); the API token goes in its first frame.
     *
     * @return the running exec
     */
    ExecStream exec(String sandbox, java.util.List<String> argv, java.util.Map<String, String> env,
                    java.util.Optional<int[]> terminal, java.io.OutputStream stdout, java.io.OutputStream stderr) {
        return ExecStream.start(ExecStream.channel(url), token, sandbox, argv, env, terminal, stdout, stderr);
    }

    /**
     * Opens one forwarded connection to a loopback port inside the sandbox.
     *
     * @return the open relay
     */
    ExecStream forward(String sandbox, int port, java.io.OutputStream back) {
        return ExecStream.forward(ExecStream.channel(url), token, sandbox, port, back);
    }

    static GatewayClient connect(Path state) {
        JsonObject endpoint = endpoint(state);
        String token;
        try {
            token = Files.readString(state.resolve("api-token"), StandardCharsets.US_ASCII).strip();
        } catch (IOException e) {
            throw new CliException(CliException.NO_GATEWAY, "cannot read the API token in " + state
                    + ": " + e.getMessage());
        }
        return new GatewayClient(endpoint.getString("url"), token);
    }

    static JsonObject endpoint(Path state) {
        Path file = state.resolve("gateway.json");
        try (JsonReader r = Json.createReader(new StringReader(Files.readString(file)))) {
            return r.readObject();
        } catch (NoSuchFileException e) {
            throw new CliException(CliException.NO_GATEWAY, "no gateway is running for " + state
                    + "; start one with: openshell gateway start --background");
        } catch (IOException | RuntimeException e) {
            throw new CliException(CliException.NO_GATEWAY, "cannot read " + file + ": " + e.getMessage());
        }
    }

    Reply call(String method, String path) {
        return call(method, path, null);
    }

    Reply call(String method, String path, JsonObject payload) {
        // A query (path?k=v&...) goes as query parameters: as part of the path it would be encoded away.
        int q = path.indexOf('?');
        HttpClientRequest request = client.method(Method.create(method)).path(q < 0 ? path : path.substring(0, q))
                .header(HeaderNames.AUTHORIZATION, "Bearer " + token);
        if (q >= 0) {
            for (String pair : path.substring(q + 1).split("&")) {
                int eq = pair.indexOf('=');
                request.queryParam(eq < 0 ? pair : pair.substring(0, eq), eq < 0 ? "" : pair.substring(eq + 1));
            }
        }
        if (payload != null) {
            request.header(HeaderNames.CONTENT_TYPE, "application/json");
        }
        try (HttpClientResponse response = payload == null ? request.request() : request.submit(Main.write(payload))) {
            String text = response.entity().hasEntity() ? response.as(String.class) : "";
            JsonObject body = Json.createObjectBuilder().build();
            if (!text.isBlank()) {
                try (JsonReader r = Json.createReader(new StringReader(text))) {
                    body = r.readObject();
                } catch (jakarta.json.JsonException | IllegalStateException e) {
                    // Not the gateway's JSON (a proxy, another server on the port): say what came back.
                    body = Json.createObjectBuilder().add("message", "HTTP " + response.status().code() + " from "
                            + path + ": " + text.strip().lines().findFirst().orElse("")).build();
                }
            }
            return new Reply(response.status().code(), body);
        } catch (UncheckedIOException e) {
            throw new CliException(CliException.NO_GATEWAY, "the gateway does not answer: " + e.getMessage()
                    + "; is it running? (openshell gateway status)");
        }
    }

    /**
     * A streamed call: each line of a 200 reply's NDJSON body goes to {@code onLine} as it arrives.
     *
     * @return the reply: status and, for anything but 200, the JSON error body
     */
    Reply stream(String path, JsonObject payload, java.util.function.Consumer<JsonObject> onLine) {
        HttpClientRequest request = streaming.method(Method.POST).path(path)
                .header(HeaderNames.AUTHORIZATION, "Bearer " + token)
                .header(HeaderNames.CONTENT_TYPE, "application/json");
        try (HttpClientResponse response = request.submit(Main.write(payload))) {
            if (response.status().code() != 200) {
                String text = response.entity().hasEntity() ? response.as(String.class) : "";
                JsonObject body = Json.createObjectBuilder().build();
                if (!text.isBlank()) {
                    try (JsonReader r = Json.createReader(new StringReader(text))) {
                        body = r.readObject();
                    }
                }
                return new Reply(response.status().code(), body);
            }
            try (java.io.BufferedReader lines = new java.io.BufferedReader(new java.io.InputStreamReader(
                    response.inputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = lines.readLine()) != null) {
                    if (line.isBlank()) {
                        continue;
                    }
                    try (JsonReader r = Json.createReader(new StringReader(line))) {
                        onLine.accept(r.readObject());
                    }
                }
            } catch (IOException e) {
                throw new CliException(CliException.FAILED, "the exec stream broke: " + e.getMessage());
            }
            return new Reply(200, Json.createObjectBuilder().build());
        } catch (UncheckedIOException e) {
            throw new CliException(CliException.NO_GATEWAY, "the gateway does not answer: " + e.getMessage()
                    + "; is it running? (openshell gateway status)");
        }
    }
}
