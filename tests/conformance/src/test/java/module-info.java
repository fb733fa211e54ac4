/**
 * The supervisor + sandbox runtime pair against the isolation conformance kit, as a black box:
 * real {@code openshell-sandbox} runtimes provisioned by the process driver in fresh namespaces,
 * bound through the supervisor's registered {@code openshell-sandbox}@1 backend over the real
 * Sandbox Protocol, with this JVM playing the supervisor. Runs as root (the process driver maps a
 * private id range); says so loudly otherwise.
 */
open module openshell.tests.conformance {
    requires openshell.isolation.conformance;
    requires openshell.driver;
    requires openshell.protocol;
    requires openshell.supervisor;
    requires org.junit.jupiter.api;

    uses openshell.isolation.spi.IsolationBackendProvider;

    // Every test class fails outside the loopback-only network namespace (JUnit autodetects it).
    provides org.junit.jupiter.api.extension.Extension with openshell.tests.conformance.LoopbackOnlyExtension;
}
