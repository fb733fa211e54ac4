package openshell.supervisor;

import java.util.function.BooleanSupplier;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.WebServer;

/**
 * The supervisor's admin endpoints on Helidon: {@code /healthz} (the process answers),
 * {@code /readyz} (ready only while the boundary is running, as the caller reports, and mediation
 * is live) and {@code /metrics} (Prometheus text format). Nothing secret is ever served; bind it
 * to a local address.
 */
final class AdminServer implements AutoCloseable {
    private final WebServer server;

    private AdminServer(WebServer server) {
        this.server = server;
    }

    /**
     * @param host            the address to listen on (loopback or a private admin network)
     * @param port            the port, 0 for any
     * @param boundaryRunning the caller's signal that the boundary is Running
     * @param mediation       the sandbox's mediation
     * @return the started server
     */
    static AdminServer start(String host, int port, BooleanSupplier boundaryRunning, SandboxMediation mediation) {
        WebServer server = WebServer.builder()
                .host(host)
                .port(port)
                .routing(r -> r
                        .get("/healthz", (req, res) -> res.header(HeaderNames.CONTENT_TYPE, "application/json")
                                .send("{\"status\":\"ok\"}"))
                        .get("/readyz", (req, res) -> {
                            boolean running = boundaryRunning.getAsBoolean();
                            boolean live = mediation.live();
                            res.header(HeaderNames.CONTENT_TYPE, "application/json");
                            if (running && live) {
                                res.send("{\"status\":\"ready\"}");
                            } else {
                                res.status(Status.SERVICE_UNAVAILABLE_503).send(AuditLine.JSON.createObjectBuilder()
                                        .add("status", "not ready").add("boundaryRunning", running)
                                        .add("mediationLive", live).build().toString());
                            }
                        })
                        .get("/metrics", (req, res) -> res.header(HeaderNames.CONTENT_TYPE, "text/plain; version=0.0.4")
                                .send(mediation.metrics().prometheus())))
                .build()
                .start();
        return new AdminServer(server);
    }

    int port() {
        return server.port();
    }

    @Override
    public void close() {
        server.stop();
    }
}
