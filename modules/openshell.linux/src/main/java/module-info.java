/**
 * Linux kernel primitives over JNA, and the workload launcher.
 */
module openshell.linux {
    requires com.sun.jna;
}
