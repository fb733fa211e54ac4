package openshell.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import io.helidon.http.DirectHandler;
import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.DirectHandlers;
import io.helidon.webserver.http.HttpRouting;

/**
 * Every error the HTTP API answers has one shape, {@code {"error": REASON, "message": "..."}}
 * (openapi.yaml's {@code Error}; a refused policy adds {@code problems}), also where Helidon would
 * answer by itself with text or nothing: a request it cannot parse (400 {@code INVALID}), a body
 * over {@link GatewayServer#MAX_REQUEST_BYTES} (413 {@code TOO_LARGE}, nothing read), a path no
 * route has (404 {@code NOT_FOUND}), a method the path does not take (405
 * {@code METHOD_NOT_ALLOWED}, with {@code Allow}), and a failure no handler caught (500
 * {@code INTERNAL}, without the failure's internals). Which methods a path takes comes from
 * openapi.yaml, the API's one description.
 */
final class ApiErrors {
    /** The API's paths (templates with {@code {name}} parts) and their methods, from openapi.yaml. */
    static final Map<Pattern, Set<String>> ROUTES = routes();

    private ApiErrors() {
    }

    /** @return the listener's handlers for what Helidon answers before any route: JSON bodies */
    static DirectHandlers directHandlers() {
        DirectHandlers.Builder b = DirectHandlers.builder();
        DirectHandler json = (request, type, status, headers, message) -> DirectHandler.TransportResponse.builder()
                .status(status)
                .headers(headers)
                .header(HeaderNames.CONTENT_TYPE, "application/json")
                .entity(JsonBodies.write(JsonBodies.error(reason(status), message(status, message))))
                .build();
        for (DirectHandler.EventType type : DirectHandler.EventType.values()) {
            b.addHandler(type, json);
        }
        return b.build();
    }

    /** Adds the last route: whatever no route took is a JSON 404, or 405 where the path takes other methods. */
    static void fallback(HttpRouting.Builder r) {
        r.any((req, res) -> {
            String path = req.path().path();
            Set<String> allowed = allowed(path);
            String method = req.prologue().method().text();
            if (allowed.isEmpty()) {
                GatewayServer.send(res, Status.NOT_FOUND_404, JsonBodies.error("NOT_FOUND", "no such endpoint: " + method
                        + " " + path + " (the API is described at GET /openapi.yaml)"));
            } else {
                res.header(HeaderNames.ALLOW, String.join(", ", allowed));
                GatewayServer.send(res, Status.METHOD_NOT_ALLOWED_405, JsonBodies.error("METHOD_NOT_ALLOWED", path
                        + " takes " + String.join(", ", allowed) + ", not " + method));
            }
        });
        // A failure no handler turned into an answer: the gateway's log has it, the caller a JSON 500.
        r.error(RuntimeException.class, (req, res, e) -> {
            System.err.println("openshell gateway: " + req.prologue().method().text() + " " + req.path().path()
                    + " failed: " + e);
            if (!res.isSent()) {
                GatewayServer.send(res, Status.INTERNAL_SERVER_ERROR_500, JsonBodies.error("INTERNAL",
                        "the gateway failed on this request; its log (gateway.log) says why"));
            }
        });
    }

    /** @return the methods openapi.yaml lists for a concrete path, upper case; empty for none */
    static Set<String> allowed(String path) {
        return ROUTES.entrySet().stream().filter(e -> e.getKey().matcher(path).matches()).findFirst()
                .map(Map.Entry::getValue).orElse(Set.of());
    }

    /** @return the error's reason for a status Helidon answered with */
    static String reason(Status status) {
        return switch (status.code()) {
            case 400 -> "INVALID";
            case 404 -> "NOT_FOUND";
            case 405 -> "METHOD_NOT_ALLOWED";
            case 413 -> "TOO_LARGE";
            case 500 -> "INTERNAL";
            default -> status.reasonPhrase().toUpperCase(Locale.ROOT).replaceAll("[^A-Z0-9]+", "_");
        };
    }

    private static String message(Status status, String helidon) {
        return switch (status.code()) {
            case 413 -> "the request body is larger than the gateway takes (" + GatewayServer.MAX_REQUEST_BYTES
                    + " bytes); nothing was read or changed";
            // Never the failure's own words: they may name internals.
            case 500 -> "the gateway failed on this request; its log (gateway.log) says why";
            default -> helidon == null || helidon.isBlank() ? status.reasonPhrase() : helidon;
        };
    }

    private static Map<Pattern, Set<String>> routes() {
        String text;
        try (InputStream in = ApiErrors.class.getResourceAsStream("openapi.yaml")) {
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Map<Pattern, Set<String>> routes = new LinkedHashMap<>();
        Pattern pathLine = Pattern.compile("^  (/\\S*):$");
        Pattern methodLine = Pattern.compile("^    (get|put|post|delete|patch|head|options):.*$");
        Set<String> methods = null;
        boolean inPaths = false;
        for (String line : text.lines().toList()) {
            if (line.equals("paths:")) {
                inPaths = true;
                continue;
            }
            if (!inPaths) {
                continue;
            }
            Matcher p = pathLine.matcher(line);
            Matcher m = methodLine.matcher(line);
            if (p.matches()) {
                methods = new LinkedHashSet<>();
                routes.put(template(p.group(1)), methods);
            } else if (m.matches() && methods != null) {
                methods.add(m.group(1).toUpperCase(Locale.ROOT));
            } else if (!line.isBlank() && !line.startsWith(" ")) {
                inPaths = false;
            }
        }
        return routes.entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey, e -> java.util.Collections.unmodifiableSet(e.getValue()),
                (a, b) -> a, LinkedHashMap::new));
    }

    private static Pattern template(String path) {
        StringBuilder regex = new StringBuilder();
        for (String part : path.split("(?=\\{)|(?<=\\})")) {
            regex.append(part.startsWith("{") ? "[^/]+" : Pattern.quote(part));
        }
        return Pattern.compile(regex.toString());
    }
}
