package openshell.tests.replicas;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real PostgreSQL server on a free loopback port: initdb into a temporary directory, run as the
 * {@code postgres} user when the test runs as root (PostgreSQL refuses root). The gateway module's
 * storage tests start theirs the same way; a test module cannot reach another's test classes, so
 * this suite has its own. Without the server binaries the suite fails and says how to get them.
 */
final class Postgres implements AutoCloseable {
    static final String USER = "openshell";
    /** A password for this throw-away server only; the gateways get it through their environment. */
    static final String PASSWORD = "replicas-test-only";
    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);

    private final Path base;
    private final Process postmaster;
    private final int port;

    private Postgres(Path base, Process postmaster, int port) {
        this.base = base;
        this.postmaster = postmaster;
        this.port = port;
    }

    static Postgres start() throws Exception {
        Path bin = binaries();
        boolean root = "root".equals(System.getProperty("user.name"));
        Path base = Files.createTempDirectory("openshell-replicas-pg-");
        Path data = base.resolve("data");
        Path pwfile = base.resolve("pw");
        Files.writeString(pwfile, PASSWORD);
        if (root) {
            run(List.of("chown", "-R", "postgres:postgres", base.toString()));
        }
        run(asDbUser(root, List.of(bin.resolve("initdb").toString(), "-D", data.toString(), "-U", USER,
                "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--no-sync")));
        Files.delete(pwfile);
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        Process p = new ProcessBuilder(asDbUser(root, List.of(bin.resolve("postgres").toString(), "-D", data.toString(),
                "-p", Integer.toString(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + base,
                "-c", "fsync=off", "-c", "max_connections=200")))
                .redirectErrorStream(true).redirectOutput(base.resolve("postgres.log").toFile()).start();
        Postgres server = new Postgres(base, p, port);
        Instant deadline = Instant.now().plus(START_TIMEOUT);
        while (true) {
            try (Connection c = DriverManager.getConnection(server.url("postgres"), USER, PASSWORD)) {
                if (c.isValid(5)) {
                    return server;
                }
            } catch (SQLException e) {
                if (!p.isAlive() || Instant.now().isAfter(deadline)) {
                    server.close();
                    throw new IllegalStateException("PostgreSQL did not start: " + Files.readString(base.resolve("postgres.log")), e);
                }
                Thread.sleep(100);
            }
        }
    }

    String url(String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
    }

    /** @return the JDBC URL of a fresh, empty database */
    String freshDatabase(String name) throws SQLException {
        try (Connection c = DriverManager.getConnection(url("postgres"), USER, PASSWORD)) {
            c.createStatement().execute("CREATE DATABASE " + name);
        }
        return url(name);
    }

    @Override
    public void close() throws IOException {
        postmaster.destroy();
        try {
            if (!postmaster.waitFor(20, TimeUnit.SECONDS)) {
                postmaster.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            postmaster.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(base)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }

    private static Path binaries() throws IOException {
        Path root = Path.of("/usr/lib/postgresql");
        if (Files.isDirectory(root)) {
            try (Stream<Path> versions = Files.list(root)) {
                var found = versions.map(v -> v.resolve("bin")).filter(b -> Files.isExecutable(b.resolve("postgres")))
                        .max(Comparator.comparing(b -> Integer.parseInt(b.getParent().getFileName().toString().replaceAll("\\D", "0"))));
                if (found.isPresent()) {
                    return found.get();
                }
            }
        }
        throw new IllegalStateException("PostgreSQL server binaries not found under /usr/lib/postgresql: the replicas "
                + "suite needs a real server (apt-get install postgresql; .ci/run does this)");
    }

    private static List<String> asDbUser(boolean root, List<String> command) {
        if (!root) {
            return command;
        }
        List<String> wrapped = new ArrayList<>(List.of("runuser", "-u", "postgres", "--"));
        wrapped.addAll(command);
        return wrapped;
    }

    private static void run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " failed: " + new String(out));
        }
    }
}
