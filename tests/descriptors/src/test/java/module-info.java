/**
 * Black-box check of every product module's descriptor against a committed snapshot. It reads
 * descriptors from the module path without resolving them, so it sees exactly what was built.
 */
open module openshell.tests.descriptors {
    requires org.junit.jupiter.api;
    requires org.junit.jupiter.params;
}
