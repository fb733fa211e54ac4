/**
 * The runtime images as the process driver runs them: both jlink images launched as one sandbox,
 * probed over the supervisor's admin endpoints and ended by SIGTERM. Runs as root (the process
 * driver maps a private id range); says so loudly otherwise.
 */
open module openshell.tests.images {
    requires openshell.driver;
    requires openshell.isolation;
    requires openshell.protocol;
    requires java.net.http;
    requires org.junit.jupiter.api;
}
