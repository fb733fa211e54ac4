/**
 * End-to-end suites: the CLI and the gateway run as separate processes, exactly as a user runs
 * them, with the real process driver, supervisor and sandbox runtime, from the same module path
 * this test runs on (as root: the process driver maps a private id range per sandbox).
 *
 * <ul>
 * <li>{@code CliSandboxTest}: admission errors and exit codes; create, RUNNING, exec, the gateway's
 *     exec bound, policy set with and without {@code --wait}, list and get (human and JSON), stop,
 *     start, delete with nothing left behind.</li>
 * <li>{@code GatewayRestartTest}: SIGTERM and SIGKILL of the gateway in the middle of a sandbox's
 *     life; the restarted gateway loses nothing, the supervisor comes back at a higher credential
 *     epoch, a stolen token of an earlier epoch cannot seize the session.</li>
 * <li>{@code TwoSandboxesTest}: two sandboxes cannot see each other's processes, files or traffic;
 *     delete works with the supervisor killed.</li>
 * </ul>
 *
 * <p>{@code Leftovers} is how "nothing left behind" is checked: the sandbox's processes (by name and
 * by pid namespace), its run directory and socket, cgroup, mounts, driver state and id-range slot.
 * The session tests speak the gateway's session protocol as an intruder would, hence the protocol's
 * wire messages (a qualified export, opened to this module by the build's {@code --add-exports}).
 */
open module openshell.tests.e2e {
    requires org.junit.jupiter.api;
    requires jakarta.json;
    requires java.net.http;
    requires openshell.protocol;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    requires io.helidon.common.tls;
    requires io.helidon.webclient.grpc;
    requires io.helidon.webserver;
    requires io.helidon.webserver.grpc;
}
