package openshell.cli;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.policy.Decision;
import openshell.policy.Destination;
import openshell.policy.Policy;
import openshell.policy.PolicyGeneration;
import openshell.policy.PolicyProblem;

/**
 * {@code policy check} and {@code policy explain}: the policy engine run locally, without a
 * gateway and without running anything.
 */
final class PolicyCommands {
    static final int DENIED = 5;

    /** Where output goes and in which form. */
    interface Output {
        void print(JsonObject body, Runnable human);

        void line(String text);
    }

    private PolicyCommands() {
    }

    static int check(Deque<String> in, Output out) {
        Path file = null;
        while (!in.isEmpty()) {
            String option = in.pop();
            if (option.equals("--policy")) {
                file = Path.of(Main.value(in, option));
            } else {
                throw Main.usage("unknown option for policy check: " + option);
            }
        }
        if (file == null) {
            throw Main.usage("policy check needs --policy FILE");
        }
        Path policyFile = file;
        List<PolicyProblem> problems = Policy.check(read(policyFile));
        JsonArrayBuilder items = Json.createArrayBuilder();
        problems.forEach(p -> items.add(Json.createObjectBuilder().add("path", p.path()).add("line", p.line())
                .add("column", p.column()).add("message", p.message())));
        out.print(Json.createObjectBuilder().add("file", policyFile.toString()).add("valid", problems.isEmpty())
                .add("problems", items).build(), () -> {
                    if (problems.isEmpty()) {
                        out.line(policyFile + ": valid");
                    }
                    problems.forEach(p -> out.line(policyFile + ":" + p.line() + ":" + p.column() + ": " + p.path()
                            + ": " + p.message()));
                });
        return problems.isEmpty() ? 0 : CliException.FAILED;
    }

    static int explain(Deque<String> in, Output out) {
        Path file = null;
        String binary = null;
        String sha256 = null;
        List<Executable> ancestors = new ArrayList<>();
        String host = null;
        Integer port = null;
        String method = null;
        String path = null;
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--policy" -> file = Path.of(Main.value(in, option));
                case "--binary" -> binary = Main.value(in, option);
                case "--sha256" -> sha256 = Main.value(in, option);
                case "--ancestor" -> ancestors.add(executable(Main.value(in, option), null));
                case "--host" -> host = Main.value(in, option);
                case "--port" -> port = port(Main.value(in, option));
                case "--method" -> method = Main.value(in, option);
                case "--path" -> path = Main.value(in, option);
                default -> throw Main.usage("unknown option for policy explain: " + option);
            }
        }
        if (file == null || binary == null || host == null || port == null) {
            throw Main.usage("policy explain needs --policy FILE --binary PATH --host H --port P");
        }
        if ((method == null) != (path == null)) {
            throw Main.usage("policy explain takes --method and --path together");
        }
        Policy policy;
        try {
            policy = Policy.parse(read(file));
        } catch (RuntimeException e) {
            throw new CliException(CliException.FAILED, file + " is not a valid policy (run: openshell policy check --policy "
                    + file + "): " + e.getMessage());
        }
        IdentityResolution who = new IdentityResolution.Resolved(
                new BinaryIdentity(executable(binary, sha256), ancestors, List.of()));
        Destination where = destination(host, port);
        PolicyGeneration generation = PolicyGeneration.first(policy);
        Decision decision = method == null ? generation.decideConnection(who, where)
                : generation.decideRequest(who, where, method, path);
        JsonObjectBuilder body = Json.createObjectBuilder()
                .add("decision", decision.allowed() ? "allow" : "deny")
                .add("reason", decision.reason());
        out.print(body.build(), () -> out.line((decision.allowed() ? "ALLOW: " : "DENY: ") + decision.reason()));
        return decision.allowed() ? 0 : DENIED;
    }

    private static Destination destination(String host, int port) {
        if (host.chars().anyMatch(c -> c == ':') || host.matches("[0-9.]+")) {
            try {
                // A literal never touches DNS; a name is explained as written (no resolution here).
                return Destination.of(InetAddress.ofLiteral(host), port);
            } catch (IllegalArgumentException e) {
                throw Main.usage("--host is neither a name nor an IP literal: " + host);
            }
        }
        return Destination.unresolved(host, port);
    }

    private static Executable executable(String path, String sha256) {
        try {
            return sha256 == null ? Executable.of(path) : Executable.of(path, sha256);
        } catch (RuntimeException e) {
            throw Main.usage(e.getMessage());
        }
    }

    private static int port(String s) {
        try {
            int p = Integer.parseInt(s);
            if (p >= 1 && p <= 65535) {
                return p;
            }
        } catch (NumberFormatException e) {
            // falls through to the usage error
        }
        throw Main.usage("--port must be 1..65535: " + s);
    }

    private static byte[] read(Path file) {
        try {
            if (Files.size(file) > Policy.MAX_DOCUMENT_BYTES) {
                throw new CliException(CliException.FAILED, file + " is larger than a policy may be ("
                        + Policy.MAX_DOCUMENT_BYTES + " bytes)");
            }
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new CliException(CliException.FAILED, "cannot read " + file + ": " + e.getMessage());
        }
    }
}
