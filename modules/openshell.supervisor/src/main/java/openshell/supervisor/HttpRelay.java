package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.StringWriter;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonWriter;
import openshell.policy.Decision;
import openshell.policy.Destination;
import openshell.policy.PolicyGeneration;

/**
 * The L7 relay of a {@code rest} endpoint: reads one HTTP/1.1 request at a time from the workload,
 * decides it with the current generation, substitutes credentials, forwards it, then relays the
 * response before reading the next request. Serving requests one after another keeps pipelining
 * and keep-alive correct and lets a 403 take its place in the response order. A denied request
 * keeps the connection when its body is read and dropped first (none, a length, or chunks, up to
 * {@link #MAX_DENIED_BODY_BYTES}); otherwise the 403 closes it: a larger body, or one the client
 * holds back for {@code 100 Continue}. Closing with a body still unread made the kernel reset the
 * connection, and clients showed "Empty reply" instead of the 403.
 */
final class HttpRelay {
    /** Largest body of a denied request that is read and dropped so that the connection stays. */
    static final long MAX_DENIED_BODY_BYTES = 64 * 1024;

    private final SandboxMediation mediation;
    private final LiveRelay relay;
    private final InputStream workloadIn;
    private final OutputStream workloadOut;
    private final InputStream upstreamIn;
    private final OutputStream upstreamOut;
    private final boolean intercepted;

    /**
     * @param intercepted whether TLS was terminated here: the Host header must then name exactly
     *                    the admitted host, the name the certificate was issued for
     */
    HttpRelay(SandboxMediation mediation, LiveRelay relay, InputStream workloadIn, OutputStream workloadOut,
              InputStream upstreamIn, OutputStream upstreamOut, boolean intercepted) {
        this.mediation = mediation;
        this.relay = relay;
        this.workloadIn = workloadIn;
        this.workloadOut = workloadOut;
        this.upstreamIn = upstreamIn;
        this.upstreamOut = upstreamOut;
        this.intercepted = intercepted;
    }

    /** Answers the workload with a refusal without relaying anything (the upstream could not be reached). */
    void refuseAll(int status, String cause, String reason) throws IOException {
        refuse(workloadOut, status, cause, null, reason, true);
    }

    void run() throws IOException {
        int bufferBytes = mediation.relayBufferBytes();
        HttpInput fromWorkload = new HttpInput(workloadIn, bufferBytes);
        HttpInput fromUpstream = new HttpInput(upstreamIn, bufferBytes);
        OutputStream toWorkload = workloadOut;
        byte[] buf = new byte[bufferBytes];
        Destination admitted = relay.admission().destination();
        while (!relay.closed()) {
            HttpHead request;
            try {
                request = HttpParser.readRequest(fromWorkload);
            } catch (HttpParseException e) {
                mediation.auditRequest(relay, admitted, null, null, "deny", "MALFORMED_REQUEST", e.getMessage(), 0);
                refuse(toWorkload, e.status(), "MALFORMED_REQUEST", null, e.getMessage(), true);
                return;
            }
            if (request == null) {
                return;
            }
            long started = System.nanoTime();
            Optional<PolicyGeneration> generation = mediation.policies().current();
            Target target = target(request.host(), admitted, intercepted ? null : mediation.pins());
            if (target.problem() != null) {
                mediation.auditRequest(relay, admitted, request, null, "deny", "HOST_MISMATCH", target.problem(), System.nanoTime() - started);
                refuse(toWorkload, 403, "HOST_MISMATCH", null, target.problem(), true);
                return;
            }
            Destination where = target.destination();
            Decision decision = generation.isEmpty() ? mediation.policies().denyAll()
                    : generation.get().decideRequest(relay.admission().identity(), where, request.method(), request.target());
            if (decision instanceof Decision.Deny deny) {
                mediation.auditRequest(relay, where, request, decision, null, null, null, System.nanoTime() - started);
                boolean close = !dropDeniedBody(fromWorkload, request, buf) || !request.keepAlive();
                refuse(toWorkload, 403, deny.cause().name(), deny.rule().map(r -> r.path()).orElse(null), deny.reason(), close);
                if (close) {
                    return;
                }
                continue;
            }
            Credentials.Substitution sub = mediation.credentials().apply(request, where.host().orElse(null));
            if (sub.refusedProvider().isPresent()) {
                String why = "the placeholder of credential '" + sub.refusedProvider().get()
                        + "' may not be sent to " + where.host().orElse("this address");
                mediation.auditRequest(relay, where, request, null, "deny", "CREDENTIAL_NOT_BOUND", why, System.nanoTime() - started);
                boolean close = !dropDeniedBody(fromWorkload, request, buf) || !request.keepAlive();
                refuse(toWorkload, 403, "CREDENTIAL_NOT_BOUND", null, why, close);
                if (close) {
                    return;
                }
                continue;
            }
            mediation.auditRequest(relay, where, request, decision, null, null, null, System.nanoTime() - started);
            List<HttpHead.Header> headers = new ArrayList<>(sub.headers().size());
            for (HttpHead.Header h : sub.headers()) {
                if (!h.name().equalsIgnoreCase("expect")) {
                    headers.add(h);
                }
            }
            if (request.expectContinue()) {
                // The request is admitted: the client may send its body (upstream never sees Expect).
                toWorkload.write(HttpInput.ascii("HTTP/1.1 100 Continue\r\n\r\n"));
                toWorkload.flush();
            }
            HttpParser.writeHead(upstreamOut, request.startLine(), headers);
            HttpParser.copyBody(fromWorkload, upstreamOut, request, buf, mediation.metrics()::bytesOut);
            upstreamOut.flush();
            HttpHead response = relayResponse(fromUpstream, toWorkload, request, buf);
            if (response == null || !response.keepAlive() || !request.keepAlive()) {
                return;
            }
        }
    }

    /**
     * Reads and drops the body of a denied request, at most {@link #MAX_DENIED_BODY_BYTES}.
     *
     * @return whether the whole body is consumed (or there was none), so the connection may stay
     * @throws HttpParseException if its chunked framing is malformed
     */
    static boolean dropDeniedBody(HttpInput in, HttpHead request, byte[] buf) throws IOException {
        if (!request.hasBody()) {
            return true;
        }
        if (request.expectContinue() || request.framing() == HttpHead.Framing.UNTIL_CLOSE
                || (request.framing() == HttpHead.Framing.LENGTH && request.length() > MAX_DENIED_BODY_BYTES)) {
            // Held back for 100 Continue (never sent now), unbounded, or too large to wait for.
            return false;
        }
        long[] seen = new long[1];
        try {
            // Counted on the body bytes only, not the chunk framing.
            HttpParser.copyBody(in, OutputStream.nullOutputStream(), request, buf, n -> {
                seen[0] += n;
                if (seen[0] > MAX_DENIED_BODY_BYTES) {
                    throw new BodyTooLarge();
                }
            });
            return true;
        } catch (BodyTooLarge e) {
            return false;
        }
    }

    /** A denied chunked body went past {@link #MAX_DENIED_BODY_BYTES}. */
    private static final class BodyTooLarge extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BodyTooLarge() {
            super("denied body over " + MAX_DENIED_BODY_BYTES + " bytes", null, false, false);
        }
    }

    /** Relays interim responses and the final response; returns null when the connection must end. */
    private HttpHead relayResponse(HttpInput fromUpstream, OutputStream toWorkload, HttpHead request, byte[] buf)
            throws IOException {
        for (int interim = 0; interim <= HttpParser.MAX_INTERIM_RESPONSES; interim++) {
            HttpHead response;
            try {
                response = HttpParser.readResponse(fromUpstream, request.method());
            } catch (HttpParseException e) {
                refuse(toWorkload, 502, "BAD_UPSTREAM_RESPONSE", null, e.getMessage(), true);
                return null;
            }
            if (response.status() == 101) {
                // Upgrades were refused in the request; an unsolicited switch ends the relay.
                return null;
            }
            HttpParser.writeHead(toWorkload, response.startLine(), response.headers());
            HttpParser.copyBody(fromUpstream, toWorkload, response, buf, mediation.metrics()::bytesIn);
            toWorkload.flush();
            if (response.status() >= 200) {
                return response;
            }
        }
        return null;
    }

    /** The destination a request is decided on, or why its Host header is refused. */
    record Target(Destination destination, String problem) {
    }

    /**
     * Checks the Host header against the admitted destination, so a request cannot claim another
     * virtual host (and so other rules or credentials) than a name this supervisor pinned to the
     * connection's address. Another name pinned to the same address (an alias or CDN address
     * shared by several names) is accepted, and the request is then decided on that name, unless
     * {@code pins} is null (intercepted TLS: only the certificate's name).
     */
    static Target target(String hostHeader, Destination where, DnsPins pins) {
        String name = hostHeader;
        int port = -1;
        if (name.startsWith("[")) {
            int close = name.indexOf(']');
            if (close < 0) {
                return new Target(null, "the Host header is malformed");
            }
            String rest = name.substring(close + 1);
            name = name.substring(1, close);
            if (!rest.isEmpty()) {
                if (!rest.startsWith(":")) {
                    return new Target(null, "the Host header is malformed");
                }
                port = port(rest.substring(1));
            }
        } else {
            int colon = name.lastIndexOf(':');
            if (colon >= 0) {
                port = port(name.substring(colon + 1));
                name = name.substring(0, colon);
            }
        }
        if (port == -2 || (port >= 0 && port != where.port())) {
            return new Target(null, "the Host header names another port than the connection's " + where.port());
        }
        name = name.toLowerCase(Locale.ROOT);
        if (name.endsWith(".")) {
            name = name.substring(0, name.length() - 1);
        }
        InetAddress address = where.address().orElseThrow();
        if (where.host().isPresent()) {
            if (name.equals(where.host().get())) {
                return new Target(where, null);
            }
            for (DnsPins.Pin pin : pins == null ? List.<DnsPins.Pin>of() : pins.namesFor(address)) {
                if (pin.name().equals(name)) {
                    return new Target(pin.aliased() ? Destination.aliased(name, address, where.port())
                            : Destination.of(name, address, where.port()), null);
                }
            }
            return new Target(null, "the Host header does not name " + where.host().get()
                    + " or another name this supervisor resolved to the connection's address");
        }
        String literal = address.getHostAddress();
        return name.equals(literal) || sameAddress(name, address) ? new Target(where, null)
                : new Target(null, "the Host header does not name " + literal + ", which the connection was admitted for");
    }

    private static boolean sameAddress(String name, InetAddress address) {
        // Only IP literals are compared; a name here would need resolving, which a Host check must not do.
        if (!name.matches("[0-9a-f.:]+") || !name.contains(":") && !name.matches("[0-9.]+")) {
            return false;
        }
        try {
            return InetAddress.ofLiteral(name).equals(address);
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** @return the port, -2 if malformed */
    private static int port(String s) {
        if (s.isEmpty() || s.length() > 5 || !s.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return -2;
        }
        int p = Integer.parseInt(s);
        return p >= 1 && p <= 65535 ? p : -2;
    }

    private void refuse(OutputStream out, int status, String cause, String rule, String reason, boolean close)
            throws IOException {
        JsonObjectBuilder body = AuditLine.JSON.createObjectBuilder()
                .add("error", status == 403 ? "FORBIDDEN" : "REFUSED")
                .add("cause", cause);
        if (rule != null) {
            body.add("rule", rule);
        }
        body.add("reason", reason).add("sandbox", mediation.sandbox()).add("generation", mediation.policies().number());
        StringWriter text = new StringWriter();
        try (JsonWriter w = AuditLine.JSON.createWriter(text)) {
            w.writeObject(body.build());
        }
        byte[] bytes = text.toString().getBytes(StandardCharsets.UTF_8);
        String head = "HTTP/1.1 " + status + " " + reasonPhrase(status) + "\r\n"
                + "Content-Type: application/json\r\n"
                + "Content-Length: " + bytes.length + "\r\n"
                + (close ? "Connection: close\r\n" : "")
                + "\r\n";
        out.write(HttpInput.ascii(head));
        out.write(bytes);
        out.flush();
    }

    private static String reasonPhrase(int status) {
        return switch (status) {
            case 400 -> "Bad Request";
            case 403 -> "Forbidden";
            case 405 -> "Method Not Allowed";
            case 414 -> "URI Too Long";
            case 417 -> "Expectation Failed";
            case 431 -> "Request Header Fields Too Large";
            case 501 -> "Not Implemented";
            case 502 -> "Bad Gateway";
            case 505 -> "HTTP Version Not Supported";
            default -> "Refused";
        };
    }
}
