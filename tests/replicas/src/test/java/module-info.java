/**
 * Gateway replicas on one PostgreSQL, black box: two real gateway processes (each its own state
 * directory and port, sharing the API token, signing key and secret key, and on this one host the
 * process driver's state) on one real PostgreSQL server started from the host's binaries, with
 * the real process driver, supervisor and sandbox runtime from this test's module path (as root:
 * the process driver maps a private id range per sandbox).
 *
 * <ul>
 * <li>create through one replica, exec and get through the other (relayed to the managing one),
 *     with the exec latency of both paths;</li>
 * <li>SIGKILL of the managing replica: its sandboxes keep running, the other takes their leases
 *     within the bound (takeover p50 and max printed), and once the killed one is back its
 *     supervisors' sessions and leases come back to it;</li>
 * <li>concurrent creates spread over both replicas: each sandbox exists exactly once, with one lease;</li>
 * <li>a second gateway on the embedded H2 state of a running one does not start and names it;</li>
 * <li>at the end nothing is left: no sandbox, lease, replica row, process or driver state.</li>
 * </ul>
 */
open module openshell.tests.replicas {
    requires org.junit.jupiter.api;
    requires jakarta.json;
    requires java.net.http;
    requires java.sql;
    requires org.postgresql.jdbc;
}
