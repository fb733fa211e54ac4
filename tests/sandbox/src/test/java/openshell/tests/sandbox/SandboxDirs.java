package openshell.tests.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverRegistry;
import openshell.isolation.SandboxId;

/**
 * The folders and launchers one test's process-driver sandbox needs, with the modes its mapped
 * ids need to reach them: the launchers, a run root short enough for the supervisor socket's
 * {@code sun_path}, the driver's state, and a workspace everyone may write.
 */
record SandboxDirs(Path root, Path runRoot, Path stateRoot, Path workspace, Path supervisorLauncher, Path runtimeLauncher) {
    static SandboxDirs create(String name) throws IOException {
        Path work = Path.of(System.getProperty("openshell.mains.work.dir"));
        Files.createDirectories(work);
        Path root = Files.createTempDirectory(work, name);
        // The sandbox's mapped root and workload reach the launchers, the run root and the workspace.
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
        Path bin = Files.createDirectory(root.resolve("bin"));
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        // Short, whatever the checkout path: the supervisor socket under it must fit sun_path.
        Path runRoot = Files.createTempDirectory(Path.of("/tmp"), "os" + name);
        Files.setPosixFilePermissions(runRoot, PosixFilePermissions.fromString("rwx--x--x"));
        Path stateRoot = Files.createDirectory(root.resolve("state"));
        Path workspace = Files.createDirectory(root.resolve("workspace"));
        Files.setPosixFilePermissions(workspace, PosixFilePermissions.fromString("rwxrwxrwx"));
        String modulePath = Mains.readableModulePath(Files.createDirectory(root.resolve("lib")));
        Path supervisorLauncher = Mains.launcher(bin.resolve("openshell-supervisor"), modulePath,
                "openshell.supervisor/openshell.supervisor.SupervisorMain");
        Path runtimeLauncher = Mains.launcher(bin.resolve("openshell-sandbox"), modulePath,
                "openshell.sandbox/openshell.sandbox.SandboxMain");
        return new SandboxDirs(root, runRoot, stateRoot, workspace, supervisorLauncher, runtimeLauncher);
    }

    /** The process driver on these folders and launchers. */
    ComputeDriver driver() {
        return DriverRegistry.load().driver("process", new DriverEnvironment(stateRoot, Map.of(
                "supervisor.launcher", supervisorLauncher.toString(), "runtime.launcher", runtimeLauncher.toString(),
                "run.root", runRoot.toString())));
    }

    /** The driver's folder of one sandbox: its supervisor.log and runtime.log. */
    Path sandboxState(SandboxId id) {
        return stateRoot.resolve("process/sandboxes").resolve(id.value());
    }
}
