package openshell.tests.replicas;

import java.io.StringReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;

/**
 * One gateway replica: a real gateway process on its own state directory and a fixed loopback
 * port (the address its supervisors dial, kept across a restart), on the shared database.
 */
final class Gateway implements AutoCloseable {
    /** The secrets replicas share: the API token, the signing key, the providers' secret key. */
    static final List<String> SHARED_SECRETS = List.of("api-token", "signing-key", "secrets.key");
    private static final Duration START_TIMEOUT = Duration.ofSeconds(90);
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();

    final String name;
    final Path state;
    final int port;
    private final Host host;
    private final String jdbcUrl;
    private Process process;

    private Gateway(String name, Host host, Path state, int port, String jdbcUrl) {
        this.name = name;
        this.host = host;
        this.state = state;
        this.port = port;
        this.jdbcUrl = jdbcUrl;
    }

    /**
     * @param like a running replica whose secrets this one shares, or null for the first
     */
    static Gateway start(String name, Host host, String jdbcUrl, Gateway like) throws Exception {
        Path state = host.work().resolve("state-" + name);
        Files.createDirectories(state.getParent());
        if (!Files.exists(state)) {
            Files.createDirectory(state, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        }
        if (like != null) {
            for (String secret : SHARED_SECRETS) {
                Path copy = state.resolve(secret);
                Files.copy(like.state.resolve(secret), copy, StandardCopyOption.REPLACE_EXISTING);
                Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-------"));
            }
        }
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        Gateway g = new Gateway(name, host, state, port, jdbcUrl);
        g.launch();
        return g;
    }

    /** Starts the process again on the same state and port. */
    void launch() throws Exception {
        Files.deleteIfExists(state.resolve("gateway.json"));
        List<String> command = new ArrayList<>(List.of(Host.java(" -p " + host.modulePath(),
                "openshell.gateway/openshell.gateway.GatewayMain").split(" ")));
        command.addAll(List.of("--state", state.toString(), "--port", Integer.toString(port), "--database-url", jdbcUrl,
                "--database-user", Postgres.USER));
        host.settings().forEach((k, v) -> command.addAll(List.of("--driver-setting", k + "=" + v)));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(state.resolve("gateway.log").toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
        pb.environment().put("OPENSHELL_DATABASE_PASSWORD", Postgres.PASSWORD);
        process = pb.start();
        Instant deadline = Instant.now().plus(START_TIMEOUT);
        while (!Files.exists(state.resolve("gateway.json"))) {
            if (!process.isAlive()) {
                throw new AssertionError("gateway " + name + " exited with " + process.exitValue() + ": " + log());
            }
            if (Instant.now().isAfter(deadline)) {
                throw new AssertionError("gateway " + name + " did not listen within " + START_TIMEOUT + ": " + log());
            }
            Thread.sleep(50);
        }
    }

    String url() {
        return "http://127.0.0.1:" + port;
    }

    long pid() {
        return process.pid();
    }

    boolean alive() {
        return process != null && process.isAlive();
    }

    String replicaId() throws Exception {
        return Files.readString(state.resolve("replica-id")).strip();
    }

    String log() {
        try {
            String s = Files.readString(state.resolve("gateway.log"));
            return s.length() <= 8000 ? s : "…" + s.substring(s.length() - 8000);
        } catch (Exception e) {
            return "(no log: " + e + ")";
        }
    }

    /** SIGKILL: nothing of the gateway runs its shutdown. */
    void kill() throws Exception {
        Process p = process;
        new ProcessBuilder("kill", "-KILL", Long.toString(p.pid())).inheritIO().start().waitFor(10, TimeUnit.SECONDS);
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            throw new AssertionError("gateway " + name + " outlived SIGKILL");
        }
    }

    record Reply(int status, String body) {
        JsonObject json() {
            try (JsonReader r = Json.createReader(new StringReader(body))) {
                return r.readObject();
            }
        }
    }

    Reply call(String method, String path, String body) throws Exception {
        String token = Files.readString(state.resolve("api-token")).strip();
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url() + path)).timeout(Duration.ofSeconds(120))
                .header("Authorization", "Bearer " + token)
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (body != null) {
            b.header("Content-Type", "application/json");
        }
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        return new Reply(r.statusCode(), r.body());
    }

    /** SIGTERM and wait: the replica gives its leases up on the way out. */
    @Override
    public void close() {
        if (alive()) {
            process.destroy();
            try {
                if (!process.waitFor(60, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
