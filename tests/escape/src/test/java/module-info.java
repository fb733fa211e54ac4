/**
 * The escape suite as a black box: a real sandbox (the process driver starting the real supervisor
 * and sandbox runtime mains) whose agent tries to get out by every path the issue lists, each
 * attempt asserted by how it fails, and an upstream that must see nothing but the one allowed
 * request. Runs as root with gcc installed; says so loudly otherwise.
 */
open module openshell.tests.escape {
    requires openshell.driver;
    requires openshell.isolation;
    requires openshell.protocol;
    requires openshell.tests.support;
    requires org.junit.jupiter.api;

    // Every test class fails outside the loopback-only network namespace (JUnit autodetects it).
    provides org.junit.jupiter.api.extension.Extension with openshell.tests.escape.LoopbackOnlyExtension;
}
