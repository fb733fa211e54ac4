package openshell.gateway;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;

import openshell.driver.DriverRegistry;
import openshell.gateway.store.StoreConfig;

/**
 * The gateway program. Options: {@code --state DIR} (default {@code $OPENSHELL_HOME} or
 * {@code ~/.openshell}), {@code --host H}, {@code --port N}, {@code --database-url URL} and
 * {@code --database-user U} for PostgreSQL, whose password is read from the environment variable
 * {@code OPENSHELL_DATABASE_PASSWORD} (never a command line, where every local user could read it), and
 * {@code --driver-setting KEY=VALUE} (repeatable) for the drivers' trusted settings, such as the
 * process driver's {@code supervisor.launcher} and {@code runtime.launcher} (which may also come from
 * {@code OPENSHELL_SUPERVISOR_LAUNCHER} and {@code OPENSHELL_RUNTIME_LAUNCHER}). The operator's network
 * for every sandbox: {@code --host-alias NAME=ADDRESS} (repeatable; the supervisors dial ADDRESS, loopback
 * included, for NAME, while policy and TLS still see NAME) and {@code --upstream-ca FILE} (repeatable; PEM
 * certificates the supervisors trust for upstream TLS besides the system trust store) and
 * {@code --upstream-resolver ADDRESS:PORT} (the DNS server the supervisors ask instead of the host's
 * resolver; tests point it at one of their own on loopback). See
 * {@link OperatorNetwork}.
 *
 * <p>Once listening it writes {@code <state>/gateway.json} (0600) with its URL, pid and start time, so the CLI
 * finds it, and removes the file when it stops.
 */
public final class GatewayMain {
    static final String ENDPOINT_FILE = "gateway.json";
    /** What {@code --help} prints on stdout, and a usage error on stderr. */
    static final String USAGE = """
            usage: openshell-gateway [--state DIR] [--host H] [--port N] [--driver D] [--driver-setting KEY=VALUE]...
                                     [--database-url URL [--database-user U]] [--host-alias NAME=ADDRESS]...
                                     [--upstream-ca FILE]... [--upstream-resolver ADDRESS:PORT]

            The gateway program (openshell gateway start runs it). Options:
              --state DIR                      state directory, mode 0700 (default $OPENSHELL_HOME, else ~/.openshell)
              --host H, --port N               where the API listens (default 127.0.0.1:%d; port 0: any free one)
              --driver D                       the compute driver every sandbox runs on (default process)
              --driver-setting KEY=VALUE       a driver's trusted setting (docs/drivers.md); repeatable
              --database-url URL               PostgreSQL instead of the embedded database; the password comes
              --database-user U                from $OPENSHELL_DATABASE_PASSWORD, never the command line
              --host-alias NAME=ADDRESS        the supervisors dial ADDRESS for NAME; repeatable
              --upstream-ca FILE               PEM certificates trusted for upstream TLS; repeatable
              --upstream-resolver ADDRESS:PORT the DNS server the supervisors ask (UDP)
              -h, --help                       this usage

            exit codes: 0 stopped, 1 cannot start (the message says why and what to do), 2 usage
            """.formatted(GatewayConfig.DEFAULT_PORT);
    /** Driver settings the operator may give through the environment instead of {@code --driver-setting}. */
    static final Map<String, String> LAUNCHER_ENV = Map.of(
            "supervisor.launcher", "OPENSHELL_SUPERVISOR_LAUNCHER",
            "runtime.launcher", "OPENSHELL_RUNTIME_LAUNCHER");

    private GatewayMain() {
    }

    /**
     * @param args options as above
     */
    public static void main(String[] args) {
        if (List.of(args).contains("--help") || List.of(args).contains("-h")) {
            System.out.print(USAGE);
            System.exit(0);
            return;
        }
        GatewayConfig config;
        try {
            config = parse(List.of(args));
        } catch (GatewayException e) {
            System.err.println("openshell gateway: " + e.getMessage() + "\n");
            System.err.print(USAGE);
            System.exit(2);
            return;
        }
        GatewayServer server;
        try {
            server = GatewayServer.start(config, DriverRegistry.load());
        } catch (GatewayException e) {
            System.err.println("openshell gateway: cannot start: " + e.getMessage());
            System.exit(1);
            return;
        }
        Path endpoint = config.stateDirectory().resolve(ENDPOINT_FILE);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                Files.deleteIfExists(endpoint);
            } catch (IOException ignored) {
                // The file names this pid; a later gateway overwrites it.
            }
            server.close();
            stopped.countDown();
        }, "openshell-gateway-shutdown"));
        String url = "http://" + config.host() + ":" + server.port();
        writeEndpoint(endpoint, url);
        System.out.println("openshell gateway listening on " + url + " (state " + config.stateDirectory() + ")");
        config.network().hostAliases().forEach((name, address) -> System.out.println("openshell gateway: host alias "
                + name + " -> " + address.getHostAddress()));
        if (!config.network().upstreamAuthorities().isEmpty()) {
            System.out.println("openshell gateway: " + config.network().upstreamAuthorities().size()
                    + " extra upstream CA certificate(s) trusted");
        }
        config.network().upstreamResolver().ifPresent(r -> System.out.println("openshell gateway: supervisors resolve through "
                + r.getAddress().getHostAddress() + " port " + r.getPort()));
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static GatewayConfig parse(List<String> args) {
        Deque<String> in = new ArrayDeque<>(args);
        Path state = defaultState();
        String host = "127.0.0.1";
        int port = GatewayConfig.DEFAULT_PORT;
        String dbUrl = null;
        String dbUser = "openshell";
        Map<String, String> driverSettings = new LinkedHashMap<>();
        OperatorNetwork network = OperatorNetwork.none();
        String driver = "process";
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--state" -> state = Path.of(value(in, option)).toAbsolutePath();
                case "--host" -> host = value(in, option);
                case "--port" -> port = port(value(in, option));
                case "--database-url" -> dbUrl = value(in, option);
                case "--database-user" -> dbUser = value(in, option);
                case "--driver" -> driver = value(in, option);
                case "--host-alias" -> network = network.withAlias(value(in, option));
                case "--upstream-ca" -> network = network.withAuthorities(Path.of(value(in, option)));
                case "--upstream-resolver" -> network = network.withResolver(value(in, option));
                case "--driver-setting" -> {
                    String setting = value(in, option);
                    int eq = setting.indexOf('=');
                    if (eq < 1) {
                        throw new GatewayException(GatewayException.Reason.INVALID, "--driver-setting takes KEY=VALUE: '"
                                + setting + "'");
                    }
                    driverSettings.put(setting.substring(0, eq), setting.substring(eq + 1));
                }
                default -> throw new GatewayException(GatewayException.Reason.INVALID, "unknown option '" + option + "'");
            }
        }
        // The operator's environment may name the process driver's launchers; options win.
        LAUNCHER_ENV.forEach((setting, variable) -> Optional.ofNullable(System.getenv(variable))
                .filter(v -> !v.isBlank()).ifPresent(v -> driverSettings.putIfAbsent(setting, v)));
        String password = System.getenv().getOrDefault("OPENSHELL_DATABASE_PASSWORD", "");
        StoreConfig store = dbUrl == null ? StoreConfig.embedded(state) : new StoreConfig(dbUrl, dbUser, password);
        return new GatewayConfig(state, host, port, store, driver, driverSettings, network);
    }

    static Path defaultState() {
        String home = System.getenv("OPENSHELL_HOME");
        return home != null && !home.isBlank() ? Path.of(home).toAbsolutePath()
                : Path.of(System.getProperty("user.home"), ".openshell");
    }

    private static String value(Deque<String> in, String option) {
        if (in.isEmpty()) {
            throw new GatewayException(GatewayException.Reason.INVALID, option + " needs a value");
        }
        return in.pop();
    }

    private static int port(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new GatewayException(GatewayException.Reason.INVALID, "--port must be a number: '" + s + "'");
        }
    }

    private static void writeEndpoint(Path endpoint, String url) {
        String json = JsonBodies.write(jakarta.json.Json.createObjectBuilder().add("url", url)
                .add("pid", ProcessHandle.current().pid())
                // With the pid, the start time names this process: a recycled pid never matches.
                .add("started", ProcessHandle.current().info().startInstant().map(java.time.Instant::toEpochMilli)
                        .orElse(0L))
                .build()) + "\n";
        try {
            Path tmp = Files.createTempFile(endpoint.getParent(), ".gateway", ".json",
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            Files.writeString(tmp, json);
            Files.move(tmp, endpoint, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "cannot write " + endpoint + ": "
                    + e.getMessage(), e);
        }
    }
}
