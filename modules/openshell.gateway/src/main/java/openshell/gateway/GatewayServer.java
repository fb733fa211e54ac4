package openshell.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.grpc.GrpcRouting;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerResponse;
import jakarta.json.JsonObject;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverRegistry;
import openshell.gateway.store.ProviderStore;
import openshell.gateway.store.SandboxStore;
import openshell.gateway.store.SecretBox;
import openshell.protocol.TokenIssuer;

/**
 * The gateway's HTTP server: health endpoints open to anyone on the listening address, the
 * {@code /v1} API and its OpenAPI description only with the API token, and on the same port the
 * gRPC supervisor session (HTTP/2), which authenticates by the launch's own token instead.
 */
public final class GatewayServer implements AutoCloseable {
    /** Largest request body accepted; larger ones are refused before they are read. */
    public static final long MAX_REQUEST_BYTES = 64 * 1024;
    /** The driver setting naming a drivers' state directory shared by the replicas on one host. */
    static final String DRIVER_STATE_SETTING = "state.root";
    private final WebServer server;
    private final SandboxStore store;
    private final SessionHub sessions;
    private final ScheduledExecutorService timers;
    private final SandboxLifecycle lifecycle;
    private final SandboxObserver observer;
    private final Replicas replicas;

    private GatewayServer(WebServer server, SandboxStore store, SessionHub sessions, ScheduledExecutorService timers,
                          SandboxLifecycle lifecycle, SandboxObserver observer, Replicas replicas) {
        this.replicas = replicas;
        this.lifecycle = lifecycle;
        this.observer = observer;
        this.server = server;
        this.store = store;
        this.sessions = sessions;
        this.timers = timers;
    }

    /**
     * Starts the gateway: state directory, API token, signing key, database, HTTP listener with
     * the REST API and the supervisor session service.
     *
     * @param config  trusted configuration
     * @param drivers the compute drivers available
     * @return the running server
     */
    public static GatewayServer start(GatewayConfig config, DriverRegistry drivers) {
        return start(config, drivers, (issuer, url) -> LaunchSeals.standard(issuer, url, config.network()));
    }

    /** How the gateway seals launches; tests of the code around admission supply their own. */
    @FunctionalInterface
    interface SealerFactory {
        LaunchSealer create(TokenIssuer issuer, Supplier<String> gatewayUrl);
    }

    static GatewayServer start(GatewayConfig config, DriverRegistry drivers, SealerFactory sealers) {
        Path state = prepareStateDirectory(config.stateDirectory());
        ApiToken token = ApiToken.loadOrCreate(state);
        SecretBox secrets = SecretBox.loadOrCreate(state);
        TokenIssuer issuer = SigningKey.loadOrCreate(state, Clock.systemUTC());
        SandboxStore store = SandboxStore.open(config.store());
        ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform()
                .name("openshell-gateway-timers").daemon(true).factory());
        SandboxLifecycle lifecycle = null;
        SessionHub sessions = null;
        SandboxObserver observer = null;
        Replicas replicas;
        try {
            replicas = Replicas.open(store.leases(), state);
        } catch (RuntimeException e) {
            timers.shutdownNow();
            store.close();
            throw e;
        }
        try {
            ProviderStore providers = store.providers(secrets);
            DriverEnvironment driverEnvironment = new DriverEnvironment(driverState(config, state), config.driverSettings());
            sessions = new SessionHub(store, issuer, timers, Clock.systemUTC(), replicas);
            AtomicReference<String> url = new AtomicReference<>();
            lifecycle = new SandboxLifecycle(store, providers, drivers, driverEnvironment,
                    config.defaultDriver(), sealers.create(issuer, url::get), sessions);
            observer = new SandboxObserver(store, lifecycle, sessions, Clock.systemUTC(), System.out);
            SandboxApi sandboxes = new SandboxApi(store, lifecycle, sessions, observer);
            WebServer server = WebServer.builder()
                    .host(config.host())
                    .port(config.port())
                    .maxPayloadSize(MAX_REQUEST_BYTES)
                    // What Helidon answers by itself (400, 413, ...) is JSON like every other error.
                    .directHandlers(ApiErrors.directHandlers())
                    .routing(r -> {
                        routing(r, token, store);
                        sandboxes.routing(r);
                        ProviderApi.routing(r, providers);
                        ApiErrors.fallback(r);
                    })
                    // The supervisor session authenticates by its own token, in its first message.
                    // The users' streamed exec checks the API token in its first frame (ExecEndpoint).
                    .addRouting(GrpcRouting.builder().service(sessions)
                            .service(new ExecEndpoint(sandboxes, sessions, token)))
                    .build()
                    .start();
            url.set("http://" + config.host() + ":" + server.port());
            SessionHub hub = sessions;
            try {
                replicas.start(url.get(), hub::connected, id -> hub.disconnect(id, "this replica no longer manages the sandbox"));
            } catch (RuntimeException e) {
                server.stop();
                throw e;
            }
            observer.start();
            return new GatewayServer(server, store, sessions, timers, lifecycle, observer, replicas);
        } catch (RuntimeException e) {
            replicas.close();
            if (observer != null) {
                observer.close();
            }
            if (lifecycle != null) {
                lifecycle.close();
            }
            if (sessions != null) {
                sessions.close();
            }
            timers.shutdownNow();
            store.close();
            throw e;
        }
    }

    /**
     * Where the drivers keep their state: {@code <state>/drivers}, or the directory the driver
     * setting {@value #DRIVER_STATE_SETTING} names, which replicas on one host share so that any of
     * them can clean up what another's driver made (the process driver's id slots name it).
     */
    static Path driverState(GatewayConfig config, Path state) {
        String shared = config.driverSettings().get(DRIVER_STATE_SETTING);
        if (shared == null) {
            return state.resolve("drivers");
        }
        Path dir = Path.of(shared);
        if (!dir.isAbsolute()) {
            throw new GatewayException(GatewayException.Reason.INVALID, DRIVER_STATE_SETTING + " must be absolute: " + shared);
        }
        return dir;
    }

    private static void routing(HttpRouting.Builder r, ApiToken token, SandboxStore store) {
        r.addFilter((chain, req, res) -> {
            String path = req.path().path();
            boolean open = path.equals("/healthz") || path.equals("/readyz");
            if (open || token.admits(req.headers().first(HeaderNames.AUTHORIZATION).orElse(null))) {
                chain.proceed();
            } else {
                res.header(HeaderNames.WWW_AUTHENTICATE, "Bearer");
                send(res, Status.UNAUTHORIZED_401, JsonBodies.error("UNAUTHENTICATED",
                        "this endpoint needs the gateway's API token: Authorization: Bearer <token from the state directory's "
                                + ApiToken.FILE + ">"));
            }
        });
        r.get("/healthz", (req, res) -> send(res, Status.OK_200, JsonBodies.status("ok")));
        r.get("/readyz", (req, res) -> {
            try {
                store.ping();
                send(res, Status.OK_200, JsonBodies.status("ready"));
            } catch (GatewayException e) {
                send(res, Status.SERVICE_UNAVAILABLE_503, JsonBodies.error("UNAVAILABLE", e.getMessage()));
            }
        });
        r.get("/openapi.yaml", (req, res) -> {
            try (InputStream in = GatewayServer.class.getResourceAsStream("openapi.yaml")) {
                res.header(HeaderNames.CONTENT_TYPE, "application/yaml").send(in.readAllBytes());
            }
        });
    }

    static void guarded(ServerResponse res, Runnable work) {
        try {
            work.run();
        } catch (GatewayException e) {
            send(res, status(e.reason()), JsonBodies.error(e.reason().name(), e.getMessage()));
        } catch (DriverException e) {
            Status s = switch (e.kind()) {
                case INVALID -> Status.BAD_REQUEST_400;
                case NOT_FOUND -> Status.NOT_FOUND_404;
                case UNAVAILABLE -> Status.SERVICE_UNAVAILABLE_503;
                case FAILED -> Status.INTERNAL_SERVER_ERROR_500;
            };
            send(res, s, JsonBodies.error("DRIVER_" + e.kind().name(), e.getMessage()));
        }
    }

    static Status status(GatewayException.Reason reason) {
        return switch (reason) {
            case INVALID -> Status.BAD_REQUEST_400;
            case NOT_FOUND -> Status.NOT_FOUND_404;
            case CONFLICT -> Status.CONFLICT_409;
            case EXHAUSTED -> Status.TOO_MANY_REQUESTS_429;
            case UNAVAILABLE -> Status.SERVICE_UNAVAILABLE_503;
            case INCOMPATIBLE -> Status.INTERNAL_SERVER_ERROR_500;
        };
    }

    static void send(ServerResponse res, Status status, JsonObject body) {
        res.status(status).header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(JsonBodies.write(body));
    }

    private static Path prepareStateDirectory(Path dir) {
        try {
            if (!Files.exists(dir)) {
                Files.createDirectories(dir.getParent());
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            }
            String perms = PosixFilePermissions.toString(Files.getPosixFilePermissions(dir));
            if (!perms.equals("rwx------")) {
                throw new GatewayException(GatewayException.Reason.INVALID, "the gateway state directory " + dir
                        + " has permissions " + perms + ", but it holds the API token and the signing key and must be"
                        + " private to its user (rwx------); fix it with: chmod 700 " + dir);
            }
            return dir;
        } catch (IOException e) {
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "cannot prepare the state directory "
                    + dir + ": " + e.getMessage(), e);
        }
    }

    /** @return the port the API listens on */
    public int port() {
        return server.port();
    }

    @Override
    public void close() {
        // First: no pass may judge a sandbox from sessions and drivers being closed under it.
        observer.close();
        sessions.close();
        server.stop();
        // After the API stopped: the leases go back at once, for the other replicas to take.
        replicas.close();
        lifecycle.close();
        timers.shutdownNow();
        store.close();
    }

    /** @return the observer, for tests of the code around it */
    SandboxObserver observer() {
        return observer;
    }

    /** @return the supervisor sessions, for tests of the code around them */
    SessionHub sessions() {
        return sessions;
    }
}
