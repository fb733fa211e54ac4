package openshell.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shape of the command line, without a gateway: {@code --help}/{@code -h} on every command,
 * a usage error prints that command's usage on stderr with exit 2, {@code -o}/{@code --output}
 * anywhere before {@code --} and never ignored, one JSON document per run, and the CLI's own lines
 * never run on from output that did not end its line.
 */
class CommandLineTest {
    @TempDir
    Path tmp;

    /** One run of the CLI in this JVM: exit code and both streams. */
    record Run(int exit, String out, String err) {
        JsonObject json() {
            try (JsonReader r = Json.createReader(new StringReader(out))) {
                JsonObject doc = r.readObject();
                // One document: nothing after it but its newline.
                assertEquals(out.strip(), Main.write(doc), "one JSON document on stdout: " + out);
                return doc;
            }
        }
    }

    private Run run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--state", tmp.resolve("home").toString()));
        all.addAll(List.of(args));
        int exit = new Main(new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true,
                StandardCharsets.UTF_8)).run(all);
        return new Run(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static List<String> words(String path) {
        return path.isEmpty() ? List.of() : List.of(path.split(" "));
    }

    @Test
    void everyCommandAndGroupHasHelpOnStdoutWithExitZero() {
        List<String> paths = new ArrayList<>(Usage.COMMANDS.stream().map(Usage.Command::path).toList());
        paths.addAll(Usage.GROUPS);
        paths.add("");
        for (String path : paths) {
            for (String flag : new String[] {"--help", "-h"}) {
                List<String> args = new ArrayList<>(words(path));
                args.add(flag);
                Run r = run(args.toArray(String[]::new));
                assertEquals(0, r.exit(), path + " " + flag + ": " + r.err());
                assertEquals("", r.err(), path + " " + flag);
                assertEquals(Usage.of(path), r.out(), path + " " + flag);
                assertTrue(r.out().startsWith("usage: openshell " + (path.isEmpty() ? "[" : path)), r.out());
            }
            // Help anywhere before --, also among the command's own options and before the command.
            List<String> first = new ArrayList<>(List.of("-h"));
            first.addAll(words(path));
            assertEquals(Usage.of(path), run(first.toArray(String[]::new)).out(), "-h " + path);
            if (!path.isEmpty() && !Usage.GROUPS.contains(path)) {
                List<String> help = new ArrayList<>(List.of("help"));
                help.addAll(words(path));
                assertEquals(Usage.of(path), run(help.toArray(String[]::new)).out(), "help " + path);
            }
        }
        Run mid = run("sandbox", "create", "--policy", "p.yaml", "--help", "--", "/bin/true");
        assertEquals(0, mid.exit());
        assertEquals(Usage.of("sandbox create"), mid.out());
        // After -- a -h is the agent's own.
        Run agents = run("sandbox", "create", "--", "/bin/ls", "-h");
        assertEquals(2, agents.exit(), "the agent's -h is no help; create still lacks --policy: " + agents.err());
    }

    @Test
    void anUnknownOptionPrintsTheUsageOfItsCommandOnStderrWithExitTwo() {
        String[][] cases = {
                {"version"}, {"gateway", "status"}, {"gateway", "stop"}, {"gateway", "start"},
                {"sandbox", "list"}, {"sandbox", "get", "job"}, {"sandbox", "delete", "job"}, {"sandbox", "logs", "job"},
                {"sandbox", "stop", "job"}, {"sandbox", "start", "job"}, {"sandbox", "create", "--policy", "p.yaml"},
                {"sandbox", "exec", "job"}, {"sandbox", "forward", "job", "8000"}, {"provider", "list"},
                {"provider", "delete", "x"}, {"provider", "create", "x"}, {"policy", "set", "job"}, {"policy", "check"},
                {"policy", "explain"}, {"run"}};
        for (String[] c : cases) {
            List<String> args = new ArrayList<>(List.of(c));
            args.add("--bogus");
            String path = Usage.path(List.of(c));
            Run r = run(args.toArray(String[]::new));
            assertEquals(2, r.exit(), String.join(" ", c) + ": " + r.err());
            assertEquals("", r.out(), String.join(" ", c));
            assertTrue(r.err().startsWith("openshell: "), r.err());
            assertTrue(r.err().contains("--bogus"), String.join(" ", c) + ": " + r.err());
            assertTrue(r.err().endsWith(Usage.of(path)), "the usage of " + path + " follows: " + r.err());
        }
        // A subcommand that does not exist: its group's usage.
        Run sub = run("sandbox", "frobnicate");
        assertEquals(2, sub.exit());
        assertTrue(sub.err().contains("unknown command 'sandbox frobnicate'") && sub.err().endsWith(Usage.of("sandbox")),
                sub.err());
        Run top = run("frobnicate");
        assertEquals(2, top.exit());
        assertTrue(top.err().endsWith(Usage.of("")), top.err());
        assertFalse(Files.exists(tmp.resolve("home")), "a usage error changes nothing, not even the state directory");
    }

    @Test
    void outputJsonIsTakenAnywhereBeforeTheSeparatorAndNeverIgnored() {
        for (String[] args : new String[][] {
                {"-o", "json", "version"}, {"version", "-o", "json"}, {"version", "--output", "json"},
                {"version", "--output=json"}, {"--output", "text", "version", "-o", "json"}}) {
            Run r = run(args);
            assertEquals(0, r.exit(), String.join(" ", args) + ": " + r.err());
            assertTrue(r.json().containsKey("version"), String.join(" ", args) + ": " + r.out());
        }
        Run text = run("version", "-o", "text");
        assertTrue(text.out().startsWith("openshell "), text.out());
        Run human = run("version", "--output", "human");
        assertEquals(text.out(), human.out(), "human is kept as a synonym of text");

        Run unknown = run("version", "-o", "yaml");
        assertEquals(2, unknown.exit());
        assertTrue(unknown.err().contains("-o takes text or json, not 'yaml'"), unknown.err());
        assertTrue(unknown.err().endsWith(Usage.of("version")), unknown.err());
        Run missing = run("sandbox", "list", "--output");
        assertEquals(2, missing.exit());
        assertTrue(missing.err().contains("--output needs a value (text or json)"), missing.err());
        assertTrue(missing.err().endsWith(Usage.of("sandbox list")), missing.err());
    }

    @Test
    void aPolicyCheckIsOneJsonDocumentWithTheOptionAtTheEnd() throws Exception {
        Path policy = Files.writeString(tmp.resolve("p.yaml"), "version: 1\n");
        Run r = run("policy", "check", "--policy", policy.toString(), "-o", "json");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.json().getBoolean("valid"), r.out());
        Path bad = Files.writeString(tmp.resolve("bad.yaml"), "version: 2\n");
        Run invalid = run("policy", "check", "--policy", bad.toString(), "--output", "json");
        assertEquals(1, invalid.exit());
        assertFalse(invalid.json().getBoolean("valid"), invalid.out());
    }

    @Test
    void anErrorWithOutputJsonIsOneErrorDocumentOfTheGatewaysShape() {
        Run r = run("sandbox", "list", "-o", "json");
        assertEquals(3, r.exit(), r.err());
        JsonObject doc = r.json();
        assertEquals("NO_GATEWAY", doc.getString("error"));
        assertEquals(3, doc.getInt("exitCode"));
        assertTrue(doc.getString("message").contains("openshell gateway start"), doc.toString());

        // A command whose output is the command's own has no JSON form: said, not ignored.
        Run exec = run("sandbox", "exec", "job", "-o", "json", "--", "/bin/true");
        assertEquals(2, exec.exit());
        assertEquals("USAGE", exec.json().getString("error"));
        assertTrue(exec.err().endsWith(Usage.of("sandbox exec")), exec.err());
        Run foreground = run("gateway", "start", "-o", "json");
        assertEquals(2, foreground.exit());
        assertTrue(foreground.json().getString("message").contains("--background"), foreground.out());
    }

    @Test
    void aStateDirectoryOthersCanEnterIsRefusedWithTheCommandThatFixesIt() throws Exception {
        Path home = Files.createDirectory(tmp.resolve("home"));
        Files.setPosixFilePermissions(home, PosixFilePermissions.fromString("rwxr-xr-x"));
        Run r = run("gateway", "start", "--background", "--port", "0");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("has permissions rwxr-xr-x") && r.err().contains("fix it with: chmod 700 " + home),
                r.err());
        assertFalse(Files.exists(home.resolve("gateway.log")), "nothing was started: " + r.err());
        Path policy = Files.writeString(tmp.resolve("p.yaml"), "version: 1\n");
        Run run = run("run", "--policy", policy.toString(), "--", "/bin/true");
        assertTrue(run.err().contains("fix it with: chmod 700 " + home), run.err());
    }

    @Test
    void theClisOwnLinesNeverRunOnFromOutputThatDidNotEndItsLine() {
        ByteArrayOutputStream terminal = new ByteArrayOutputStream();
        // stdout and stderr on one terminal, as a user sees them.
        PrintStream both = new PrintStream(terminal, true, StandardCharsets.UTF_8);
        Main main = new Main(both, both);
        main.out().print("a 403 body without a newline");
        main.message("openshell: could not delete sandbox x");
        main.message("a second line");
        main.err().print("half");
        main.message("after stderr");
        assertEquals("a 403 body without a newline\nopenshell: could not delete sandbox x\na second line\nhalf\nafter stderr\n",
                terminal.toString(StandardCharsets.UTF_8));
    }

    @Test
    void aGatewayThatDidNotStartIsQuotedFromWhatItsStartWrote() throws Exception {
        Path log = tmp.resolve("gateway.log");
        Files.writeString(log, "openshell gateway: an older start's words\n");
        long from = Files.size(log);
        Files.writeString(log, "openshell gateway: cannot start: the gateway state directory /x has permissions"
                + " rwxr-xr-x, ...; fix it with: chmod 700 /x\n\nusage: ...\n", java.nio.file.StandardOpenOption.APPEND);
        assertEquals("cannot start: the gateway state directory /x has permissions rwxr-xr-x, ...; fix it with: chmod 700 /x",
                GatewayStartLog.cause(log, from));
        Files.writeString(log, "Exception in thread main\n\tat a\n\tat b\n\tat c\n", java.nio.file.StandardOpenOption.APPEND);
        assertTrue(GatewayStartLog.cause(log, Files.size(log) - 33).endsWith("at a / at b / at c"),
                GatewayStartLog.cause(log, Files.size(log) - 33));
        assertEquals("it wrote nothing to its log", GatewayStartLog.cause(log, Files.size(log)));
        // The gateway's own line further back than the bound is not searched for: the last lines are quoted.
        Path big = tmp.resolve("big.log");
        Files.writeString(big, "openshell gateway: too far back\n" + "x\n".repeat(GatewayStartLog.MAX_READ_BYTES / 2)
                + "one\ntwo\nthree\nfour\n");
        assertEquals("two / three / four", GatewayStartLog.cause(big, 0));
    }
}
