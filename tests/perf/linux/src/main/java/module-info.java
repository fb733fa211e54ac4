/**
 * Benchmarks of {@code openshell.linux}: the seccomp notification round trip with a Java handler
 * (against a minimal C supervisor on the same machine) and the launcher's start latency. A
 * harness writing JSON, not JMH: both measurements need real child processes and a filtered
 * thread, which JMH's forking model does not fit. It reads {@code openshell.linux}, which exports
 * nothing, through {@code --add-exports} given by this module's build only.
 */
module openshell.perf.linux {
    requires openshell.linux;
    requires com.sun.jna;
}
