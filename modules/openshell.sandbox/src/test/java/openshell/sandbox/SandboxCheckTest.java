package openshell.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@code --check}, the images' health probe: the real startup path, then exit 0; a way out fails it. */
class SandboxCheckTest {

    private static Process check(boolean freshNetwork) throws Exception {
        List<String> command = new ArrayList<>();
        if (freshNetwork) {
            command.addAll(List.of("/usr/bin/unshare", "--net", "--mount"));
        }
        command.addAll(List.of(System.getProperty("java.home") + "/bin/java",
                "--enable-native-access=com.sun.jna", "-Djna.boot.library.path=" + System.getProperty("jna.boot.library.path"),
                "-Djna.nounpack=true", "-Djna.noclasspath=true", "-p", System.getProperty("jdk.module.path"),
                "-m", "openshell.sandbox/openshell.sandbox.SandboxMain", SandboxCheck.FLAG));
        Process p = new ProcessBuilder(command).start();
        p.getOutputStream().close();
        return p;
    }

    @Test
    void checkRunsTheStartupPathInAFencedNamespaceAndExitsZero() throws Exception {
        Process p = check(true);
        assertTrue(p.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(SandboxCheck.EXIT_OK, p.exitValue(), out + err);
        assertTrue(out.startsWith("{\"check\":\"passed\""), out);
        assertTrue(out.contains("\"interfaces\":\"[lo]\",\"directEgressFailed\":true,\"dumpable\":false,\"dnsRelay\":\"/127.0.0.53:53\""), out);
    }

    @Test
    void checkFailsWhereTheNetworkHasAWayOut() throws Exception {
        Process p = check(false);
        assertTrue(p.waitFor(TestSandbox.WAIT.toSeconds(), TimeUnit.SECONDS));
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(SandboxMain.EXIT_PROBE_FAILED, p.exitValue(), err);
        assertTrue(err.contains("check failed") && err.contains("must hold only lo"), err);
    }
}
