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
import openshell.policy.PolicyException;
import openshell.policy.PolicyProblem;
import openshell.policy.RuleRef;
import openshell.policy.WorkloadPaths;

/**
 * {@code policy check} and {@code policy explain}: the policy engine run locally, without a
 * gateway and without running anything. Explain takes the inputs a live decision has (binary,
 * digest, ancestors, host, the address it resolved to, port, method, target with its query) and
 * asks the same engine call the supervisor does, so the two cannot disagree.
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

    /**
     * Where this project is stricter than upstream, said by {@code policy check} of every valid
     * policy: the DNS plane answers a caller only for names a block lists for its binary.
     */
    static final String DNS_NOTE = "DNS answers are authorized per binary here (upstream answers every name): a lookup"
            + " tool such as getent, nslookup or dig gets answers only for the names a block lists for that tool's"
            + " binary, so list it in the block (or resolve from the binary that connects)";

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
        byte[] document = read(policyFile);
        List<PolicyProblem> problems = Policy.check(document);
        List<String> notes = new ArrayList<>();
        if (problems.isEmpty()) {
            notes.add(DNS_NOTE);
            for (RuleRef audited : Policy.parse(document).auditedEndpoints()) {
                notes.add(audited.path() + " (line " + audited.line() + ") has enforcement: audit: requests its rules refuse"
                        + " are forwarded and logged as would-be denials, never blocked");
            }
        }
        JsonArrayBuilder items = Json.createArrayBuilder();
        problems.forEach(p -> items.add(Json.createObjectBuilder().add("path", p.path()).add("line", p.line())
                .add("column", p.column()).add("message", p.message())));
        JsonArrayBuilder noteItems = Json.createArrayBuilder();
        notes.forEach(noteItems::add);
        out.print(Json.createObjectBuilder().add("file", policyFile.toString()).add("valid", problems.isEmpty())
                .add("problems", items).add("notes", noteItems).build(), () -> {
                    if (problems.isEmpty()) {
                        out.line(policyFile + ": valid");
                    }
                    problems.forEach(p -> out.line(policyFile + ":" + p.line() + ":" + p.column() + ": " + p.path()
                            + ": " + p.message()));
                    notes.forEach(n -> out.line("note: " + n));
                });
        return problems.isEmpty() ? 0 : CliException.FAILED;
    }

    /**
     * One question for the engine, with the inputs a live decision has.
     *
     * @param method null for the connection decision
     * @param target the request target, query included; null with {@code method}
     */
    record Question(IdentityResolution who, Destination where, String method, String target) {
        Decision ask(PolicyGeneration generation) {
            return method == null ? generation.decideConnection(who, where) : generation.decideRequest(who, where, method, target);
        }
    }

    static int explain(Deque<String> in, Output out) {
        Path file = null;
        String binary = null;
        String sha256 = null;
        List<Executable> ancestors = new ArrayList<>();
        String host = null;
        String address = null;
        Integer port = null;
        String method = null;
        String path = null;
        Path root = null;
        while (!in.isEmpty()) {
            String option = in.pop();
            switch (option) {
                case "--policy" -> file = Path.of(Main.value(in, option));
                case "--binary" -> binary = Main.value(in, option);
                case "--sha256" -> sha256 = Main.value(in, option);
                case "--ancestor" -> ancestors.add(executable(Main.value(in, option)));
                case "--host" -> host = Main.value(in, option);
                case "--address" -> address = Main.value(in, option);
                case "--port" -> port = port(Main.value(in, option));
                case "--method" -> method = Main.value(in, option);
                case "--path" -> path = Main.value(in, option);
                case "--workload-root" -> root = Path.of(Main.value(in, option));
                default -> throw Main.usage("unknown option for policy explain: " + option);
            }
        }
        if (file == null || binary == null || host == null || port == null) {
            throw Main.usage("policy explain needs --policy FILE --binary PATH --host H --port P");
        }
        if ((method == null) != (path == null)) {
            throw Main.usage("policy explain takes --method and --path together (no method: the connection decision)");
        }
        if (ancestors.size() > BinaryIdentity.MAX_ANCESTORS) {
            throw Main.usage("at most " + BinaryIdentity.MAX_ANCESTORS + " --ancestor");
        }
        Policy policy;
        try {
            policy = Policy.parse(read(file));
        } catch (RuntimeException e) {
            throw new CliException(CliException.FAILED, file + " is not a valid policy (run: openshell policy check --policy "
                    + file + "): " + e.getMessage());
        }
        IdentityResolution who = new IdentityResolution.Resolved(
                new BinaryIdentity(sha256 == null ? executable(binary) : executable(binary + "@sha256:" + sha256), ancestors, List.of()));
        Question q = new Question(who, destination(host, address, port), method, path);
        PolicyGeneration generation = root == null ? PolicyGeneration.first(policy)
                : PolicyGeneration.first(policy, WorkloadPaths.within(root));
        Decision decision = q.ask(generation);
        JsonObject body = describe(decision);
        out.print(body, () -> {
            out.line((decision.allowed() ? "ALLOW: " : "DENY: ") + decision.reason());
            if (body.containsKey("block")) {
                out.line("block: " + body.getString("block"));
            }
        });
        return decision.allowed() ? 0 : DENIED;
    }

    /** The decision as {@code policy explain --json} prints it; the same fields as the supervisor's audit line. */
    static JsonObject describe(Decision decision) {
        JsonObjectBuilder body = Json.createObjectBuilder()
                .add("decision", decision.allowed() ? "allow" : "deny")
                .add("reason", decision.reason());
        switch (decision) {
            case Decision.Allow a -> {
                body.add("rule", a.rule().path()).add("block", a.rule().block()).add("inspection", a.inspection().name());
                a.wouldDeny().ifPresent(w -> {
                    JsonObjectBuilder audit = Json.createObjectBuilder().add("cause", w.cause().name()).add("reason", w.reason());
                    w.rule().ifPresent(r -> audit.add("rule", r.path()));
                    body.add("wouldDeny", audit);
                });
            }
            case Decision.Deny d -> {
                body.add("cause", d.cause().name());
                d.rule().ifPresent(r -> body.add("rule", r.path()).add("block", r.block()));
            }
        }
        return body.build();
    }

    /** A name, or an IP literal (never resolved here); with {@code --address}, the name as it resolved live. */
    static Destination destination(String host, String address, int port) {
        InetAddress literal = literal(host);
        if (literal != null) {
            if (address != null) {
                throw Main.usage("--address goes with a host name, not with the IP literal " + host);
            }
            return Destination.of(literal, port);
        }
        try {
            if (address == null) {
                return Destination.unresolved(host, port);
            }
            InetAddress a = literal(address);
            if (a == null) {
                throw Main.usage("--address must be an IP literal: " + address);
            }
            return Destination.of(host, a, port);
        } catch (PolicyException e) {
            throw Main.usage("--host is neither a name nor an IP literal: " + host);
        }
    }

    private static InetAddress literal(String text) {
        if (text.chars().anyMatch(c -> c == ':') || text.matches("[0-9.]+")) {
            try {
                // A literal never touches DNS; a name is explained as written (no resolution here).
                return InetAddress.ofLiteral(text.startsWith("[") && text.endsWith("]") ? text.substring(1, text.length() - 1) : text);
            } catch (IllegalArgumentException e) {
                throw Main.usage("not an IP literal: " + text);
            }
        }
        return null;
    }

    /** {@code PATH} or {@code PATH@sha256:HEX}, as the audit line writes an executable. */
    static Executable executable(String spec) {
        int at = spec.indexOf("@sha256:");
        try {
            return at < 0 ? Executable.of(spec) : Executable.of(spec.substring(0, at), spec.substring(at + "@sha256:".length()));
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
