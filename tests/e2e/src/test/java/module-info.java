/**
 * End-to-end suites: the CLI and the gateway run as separate processes, exactly as a user runs
 * them, from the same module path this test runs on.
 */
open module openshell.tests.e2e {
    requires org.junit.jupiter.api;
}
