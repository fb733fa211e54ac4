package openshell.gateway.store;

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
 * A real PostgreSQL server for the storage tests: initdb into a temporary directory and a
 * postmaster on a free loopback port, run as the {@code postgres} user when the tests run as root
 * (PostgreSQL refuses root). If the server binaries are missing the tests fail and say how to get
 * them; they never pass without a real server.
 */
final class PostgresServer implements AutoCloseable {
    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    static final String USER = "openshell";
    static final String PASSWORD = "test-only-password";

    private final Path dataDir;
    private final Process postmaster;
    private final int port;

    private PostgresServer(Path dataDir, Process postmaster, int port) {
        this.dataDir = dataDir;
        this.postmaster = postmaster;
        this.port = port;
    }

    static PostgresServer start() throws IOException, InterruptedException {
        Path bin = binaries();
        boolean root = "root".equals(System.getProperty("user.name"));
        Path base = Files.createTempDirectory("openshell-pg-");
        Path data = base.resolve("data");
        Path pwfile = base.resolve("pw");
        Files.writeString(pwfile, PASSWORD);
        if (root) {
            run(List.of("chown", "-R", "postgres:postgres", base.toString()), Duration.ofSeconds(10));
        }
        run(asDbUser(root, List.of(bin.resolve("initdb").toString(), "-D", data.toString(), "-U", USER,
                "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8",
                "--no-sync")), Duration.ofSeconds(60));
        Files.delete(pwfile);
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<String> cmd = asDbUser(root, List.of(bin.resolve("postgres").toString(), "-D", data.toString(),
                "-p", Integer.toString(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + base,
                "-c", "fsync=off"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(base.resolve("postgres.log").toFile()).start();
        PostgresServer server = new PostgresServer(base, p, port);
        Instant deadline = Instant.now().plus(START_TIMEOUT);
        while (true) {
            try (Connection c = DriverManager.getConnection(server.url("postgres"), USER, PASSWORD)) {
                if (c.isValid(5)) {
                    return server;
                }
            } catch (SQLException e) {
                if (!p.isAlive() || Instant.now().isAfter(deadline)) {
                    server.close();
                    throw new IllegalStateException("PostgreSQL did not start: "
                            + Files.readString(base.resolve("postgres.log")), e);
                }
                Thread.sleep(100);
            }
        }
    }

    String url(String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
    }

    /** @return a fresh, empty database on this server */
    StoreConfig freshDatabase(String name) throws SQLException {
        try (Connection c = DriverManager.getConnection(url("postgres"), USER, PASSWORD)) {
            c.createStatement().execute("CREATE DATABASE " + name);
        }
        return new StoreConfig(url(name), USER, PASSWORD);
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
        try (Stream<Path> files = Files.walk(dataDir)) {
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
        throw new IllegalStateException("PostgreSQL server binaries not found under /usr/lib/postgresql: "
                + "the storage tests need a real server (apt-get install postgresql; .ci/run does this)");
    }

    private static List<String> asDbUser(boolean root, List<String> command) {
        if (!root) {
            return command;
        }
        List<String> wrapped = new ArrayList<>(List.of("runuser", "-u", "postgres", "--"));
        wrapped.addAll(command);
        return wrapped;
    }

    private static void run(List<String> command, Duration timeout) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(timeout.toSeconds(), TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " failed: " + new String(out));
        }
    }
}
