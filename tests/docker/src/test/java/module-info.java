/**
 * The Docker suites, on a real dockerd: what runs in a workload container (the sandbox runtime as
 * PID 1, package {@code openshell.tests.docker.runtime}) and the Docker driver that puts it there
 * (package {@code openshell.tests.docker.driver}). A machine without a reachable dockerd fails
 * every test saying how to start one; nothing is skipped.
 */
open module openshell.tests.docker {
    requires openshell.isolation;
    requires openshell.driver;
    requires openshell.protocol;
    requires org.bouncycastle.provider;
    requires org.bouncycastle.pkix;
    requires org.junit.jupiter.api;
    requires jdk.httpserver;
}
