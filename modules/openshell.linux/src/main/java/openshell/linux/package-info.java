/**
 * Typed Java APIs over Linux kernel calls (seccomp user notification, Landlock, capabilities,
 * namespaces, pidfd, task memory, PTY, Unix socket extras, cgroup v2) and the workload launcher
 * with its parent side. Exported only to named friends; see the module documentation.
 */
package openshell.linux;
