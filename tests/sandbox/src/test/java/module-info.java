/**
 * End-to-end tests of one sandbox as a black box: the gateway's part (minting launch bundles) done
 * by the test, the process driver found through the compute driver SPI, and the real supervisor and
 * sandbox runtime mains started by it as separate processes. Runs as root (the process driver maps
 * a private id range); says so loudly otherwise.
 */
open module openshell.tests.sandbox {
    requires openshell.driver;
    requires openshell.isolation;
    requires openshell.protocol;
    requires openshell.tests.support;
    requires org.junit.jupiter.api;
    requires jdk.httpserver;

    // Every test class fails outside the loopback-only network namespace (JUnit autodetects it).
    provides org.junit.jupiter.api.extension.Extension with openshell.tests.sandbox.LoopbackOnlyExtension;
}
