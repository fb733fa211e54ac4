/**
 * Linux kernel primitives over JNA, and the workload launcher. Exports nothing publicly: only the
 * sandbox runtime, the supervisor and drivers get qualified access.
 */
module openshell.linux {
    requires com.sun.jna;
}
