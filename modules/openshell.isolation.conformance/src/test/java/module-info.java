/**
 * The kit's own tests, black-box on the module path: a plain backend of ordinary child processes
 * (no isolation, never registered by a product module) and deliberately broken variants of it,
 * run through the kit to show which checks pass and which fail.
 */
open module openshell.isolation.conformance.selftest {
    requires openshell.isolation.conformance;
    requires org.junit.platform.testkit;
    requires org.junit.jupiter.params;

    // For the command-line runner's test only: the plain backend is a test double.
    provides openshell.isolation.conformance.ConformanceTarget
            with openshell.isolation.conformance.selftest.PlainTarget;
}
