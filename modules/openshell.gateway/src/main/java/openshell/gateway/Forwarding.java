package openshell.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Optional;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import openshell.gateway.store.SandboxRecord;

/**
 * Any replica answers every API call: a call that must run where a sandbox is managed (its
 * supervisor session, its driver calls) is relayed to the managing replica's recorded API address
 * with the caller's own API token (replicas share it) and its answer streamed back, exec output
 * included. A relayed call carries {@link #FORWARDED_BY}; it is never relayed again, so two
 * replicas that disagree for a moment about who manages a sandbox cannot bounce a call between
 * them: the second one serves it itself or answers 503.
 */
final class Forwarding {
    /** Names the replica that relayed a call. */
    static final HeaderName FORWARDED_BY = HeaderNames.create("X-OpenShell-Forwarded-By");
    /** Longest wait for the managing replica to accept the connection. */
    static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** Longest wait for the managing replica's answer to begin (an exec's first line included). */
    static final Duration ANSWER_TIMEOUT = Duration.ofSeconds(60);
    /** Copy buffer for relayed answers: small, so each exec line goes out as it comes. */
    private static final int BUFFER = 8 * 1024;

    private final Replicas replicas;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(CONNECT_TIMEOUT)
            .version(HttpClient.Version.HTTP_1_1).followRedirects(HttpClient.Redirect.NEVER).build();

    Forwarding(Replicas replicas) {
        this.replicas = replicas;
    }

    /**
     * Relays the call when another live replica manages the sandbox and this one may not serve it.
     *
     * @param req         the call
     * @param res         its answer
     * @param body        the call's body, already read ("" for none)
     * @param record      the sandbox
     * @param servedHere  whether this replica can serve it itself (it manages the sandbox, or holds its session)
     * @return whether the call was relayed (the answer is sent then)
     */
    boolean relayed(ServerRequest req, ServerResponse res, String body, SandboxRecord record, boolean servedHere) {
        if (servedHere || req.headers().contains(FORWARDED_BY)) {
            return false;
        }
        Optional<Replicas.Manager> manager = replicas.manager(record.id());
        if (manager.isEmpty()) {
            return false;
        }
        String query = req.query().rawValue();
        URI target = URI.create(manager.get().apiUrl() + req.path().rawPath() + (query.isEmpty() ? "" : "?" + query));
        HttpRequest.Builder out = HttpRequest.newBuilder(target).timeout(ANSWER_TIMEOUT)
                .header(FORWARDED_BY.defaultCase(), replicas.id())
                .method(req.prologue().method().text(), body.isEmpty() ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body));
        req.headers().first(HeaderNames.AUTHORIZATION).ifPresent(v -> out.header("Authorization", v));
        req.headers().first(HeaderNames.CONTENT_TYPE).ifPresent(v -> out.header("Content-Type", v));
        HttpResponse<InputStream> answer;
        try {
            answer = client.send(out.build(), HttpResponse.BodyHandlers.ofInputStream());
        } catch (IOException e) {
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "sandbox " + record.name()
                    + " is managed by replica " + manager.get().replica() + " at " + manager.get().apiUrl()
                    + ", which did not answer (" + e.getMessage() + "); retry: another replica takes it over within "
                    + Replicas.TAKEOVER_BOUND + " if it is gone", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "interrupted");
        }
        res.status(Status.create(answer.statusCode()));
        answer.headers().firstValue("content-type").ifPresent(v -> res.header(HeaderNames.CONTENT_TYPE, v));
        answer.headers().firstValue("www-authenticate").ifPresent(v -> res.header(HeaderNames.WWW_AUTHENTICATE, v));
        res.header(FORWARDED_BY, manager.get().replica());
        try (InputStream in = answer.body()) {
            if (answer.statusCode() == Status.NO_CONTENT_204.code()) {
                res.send();
                return true;
            }
            try (OutputStream to = res.outputStream()) {
                byte[] buffer = new byte[BUFFER];
                int n;
                while ((n = in.read(buffer)) > 0) {
                    to.write(buffer, 0, n);
                    to.flush();
                }
            }
        } catch (IOException | UncheckedIOException e) {
            // The caller or the managing replica went away mid-answer: closing both ends tells each.
        }
        return true;
    }
}
