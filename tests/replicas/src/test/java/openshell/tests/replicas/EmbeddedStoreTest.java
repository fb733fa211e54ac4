package openshell.tests.replicas;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** The embedded H2 store serves one gateway: a second one on the same state does not start and names the first. */
class EmbeddedStoreTest {
    @Test
    void aSecondGatewayOnTheSameEmbeddedStateFailsNamingTheFirst() throws Exception {
        Host host = Host.create();
        Path state = host.work().resolve("state-embedded");
        if (!Files.exists(state)) {
            Files.createDirectory(state, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        }
        Process first = gateway(host, state, freePort(), state.resolve("first.log"));
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (!Files.exists(state.resolve("gateway.json"))) {
                assertTrue(first.isAlive(), "the first gateway started: " + Files.readString(state.resolve("first.log")));
                assertTrue(System.nanoTime() < deadline, "the first gateway listens");
                Thread.sleep(50);
            }
            String url = Files.readString(state.resolve("gateway.json"));
            int port = freePort();
            Process second = gateway(host, state, port, state.resolve("second.log"));
            assertTrue(second.waitFor(90, TimeUnit.SECONDS), "the second gateway gives up");
            String said = Files.readString(state.resolve("second.log"));
            assertEquals(1, second.exitValue(), said);
            assertTrue(said.contains("is in use by the gateway with pid " + first.pid()), said);
            assertTrue(said.contains("listening on http://127.0.0.1:"), said);
            assertTrue(said.contains("jdbc:postgresql"), "it says what serves several replicas: " + said);
            assertTrue(first.isAlive(), "the first one is unaffected");
            assertTrue(url.contains("\"pid\":" + first.pid()), "the first one's endpoint file still names it: " + url);
        } finally {
            first.destroy();
            if (!first.waitFor(60, TimeUnit.SECONDS)) {
                first.destroyForcibly();
            }
            host.remove();
        }
    }

    private static Process gateway(Host host, Path state, int port, Path log) throws Exception {
        List<String> command = new ArrayList<>(List.of(Host.java(" -p " + host.modulePath(),
                "openshell.gateway/openshell.gateway.GatewayMain").split(" ")));
        command.addAll(List.of("--state", state.toString(), "--port", Integer.toString(port)));
        return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile())).start();
    }

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
