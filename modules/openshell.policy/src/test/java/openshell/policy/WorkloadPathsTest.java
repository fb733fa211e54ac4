package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Symlinks in policy paths are expanded inside the workload's root, as upstream does at load. */
class WorkloadPathsTest {
    @TempDir
    Path root;

    @Test
    void aLinkResolvesInsideTheRootNeverOnTheHost() throws IOException {
        Files.createDirectories(root.resolve("usr/bin"));
        Files.createFile(root.resolve("usr/bin/python3.11"));
        Files.createSymbolicLink(root.resolve("usr/bin/python3"), Path.of("python3.11"));
        // An absolute target is taken from the workload's root, not from this machine's /.
        Files.createSymbolicLink(root.resolve("usr/bin/py"), Path.of("/usr/bin/python3"));
        Files.createSymbolicLink(root.resolve("usr/bin/up"), Path.of("../../../../../usr/bin/python3.11"));
        WorkloadPaths paths = WorkloadPaths.within(root);
        assertEquals(Optional.of("/usr/bin/python3.11"), paths.resolve("/usr/bin/python3"));
        assertEquals(Optional.of("/usr/bin/python3.11"), paths.resolve("/usr/bin/py"));
        assertEquals(Optional.of("/usr/bin/python3.11"), paths.resolve("/usr/bin/up"), "'..' never climbs above the root");
        assertEquals(Optional.empty(), paths.resolve("/usr/bin/python3.11"), "a real path is left as written");
        assertEquals(Optional.empty(), paths.resolve("/usr/bin/missing"));
    }

    @Test
    void aLoopIsLeftAsWritten() throws IOException {
        Files.createSymbolicLink(root.resolve("a"), Path.of("b"));
        Files.createSymbolicLink(root.resolve("b"), Path.of("a"));
        assertEquals(Optional.empty(), WorkloadPaths.within(root).resolve("/a"));
    }

    @Test
    void aGenerationMatchesTheTargetAndTheWrittenPath() throws IOException {
        Files.createDirectories(root.resolve("usr/bin"));
        Files.createFile(root.resolve("usr/bin/python3.11"));
        Files.createSymbolicLink(root.resolve("usr/bin/python3"), Path.of("python3.11"));
        Policy p = Policy.parse("""
                version: 1
                network_policies:
                  pypi:
                    endpoints: [{host: pypi.org, port: 443}]
                    binaries: [{path: /usr/bin/python3}]
                """);
        Destination pypi = Destination.unresolved("pypi.org", 443);
        PolicyGeneration expanded = PolicyGeneration.first(p, WorkloadPaths.within(root));
        PolicyGeneration literal = PolicyGeneration.first(p);
        assertTrue(expanded.decideConnection(who("/usr/bin/python3.11"), pypi).allowed());
        assertTrue(expanded.decideConnection(who("/usr/bin/python3"), pypi).allowed());
        assertTrue(expanded.successor(p).decideConnection(who("/usr/bin/python3.11"), pypi).allowed(), "a reload expands again");
        assertEquals(DenyCause.BINARY_NOT_ALLOWED,
                ((Decision.Deny) literal.decideConnection(who("/usr/bin/python3.11"), pypi)).cause());
    }

    private static IdentityResolution who(String path) {
        return new IdentityResolution.Resolved(BinaryIdentity.of(Executable.of(path)));
    }
}
