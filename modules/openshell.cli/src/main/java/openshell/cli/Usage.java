package openshell.cli;

import java.util.List;
import java.util.stream.Collectors;

/**
 * The usage of every command and subcommand, in one table, so that {@code --help} on a command,
 * a usage error of that command and the overview ({@code openshell --help}) print the same words.
 * A command path is its words ({@code "sandbox create"}); a group ({@code "sandbox"}) lists its
 * subcommands; {@code ""} is the overview.
 */
final class Usage {
    /** One command: its path, its synopsis after {@code openshell }, and what it does. */
    record Command(String path, String synopsis, String summary) {
    }

    /** The options every command takes, anywhere before {@code --}. */
    static final String GLOBAL = """
            options of every command, anywhere before --:
              --state DIR              the gateway's state directory (else $OPENSHELL_HOME, else ~/.openshell)
              -o, --output text|json   results as text (the default) or as one JSON document on stdout
              -h, --help               this command's usage
            """;

    static final String EXIT_CODES = """
            exit codes: 0 ok (explain: allowed), 1 failed (check: invalid), 2 usage, 3 no gateway,
                        4 no such sandbox, 5 explain: denied; exec, connect and run: the command's own
            """;

    static final List<Command> COMMANDS = List.of(
            new Command("gateway start", """
                    gateway start [--background] [--port N] [--host H] [--driver D] [--driver-setting K=V]...
                                  [--host-alias NAME=ADDRESS]... [--upstream-ca FILE]... [--upstream-resolver ADDRESS:PORT]""",
                    "run the gateway (in the foreground unless --background); aliases, upstream CAs and the resolver"
                            + " apply to every sandbox (operator configuration, never policy)"),
            new Command("gateway status", "gateway status", "is the gateway up, and where"),
            new Command("gateway stop", "gateway stop", "stop a background gateway"),
            new Command("sandbox create", """
                    sandbox create --policy FILE [--name N] [--driver D] [--image IMAGE] [--workspace DIR] [--provider P]...
                                   [--env K=V]... [--no-wait] -- AGENT...""",
                    "admit and launch; waits until it runs (progress on stderr) unless --no-wait; --image: the workload"
                            + " image a container driver (docker) runs"),
            new Command("sandbox list", "sandbox list", "every sandbox"),
            new Command("sandbox get", "sandbox get NAME", "one sandbox (recorded and observed state)"),
            new Command("sandbox exec", "sandbox exec NAME [--tty] [--no-stdin] -- CMD...",
                    "run CMD in it with stdin streamed (EOF half-closes it); stdout/stderr separate, or merged on a"
                            + " PTY with --tty; exits with CMD's exit code; Ctrl-C ends CMD's tree"),
            new Command("sandbox connect", "sandbox connect NAME [-- CMD...]",
                    "interactive shell (or CMD) on a PTY: raw terminal, window size follows yours"),
            new Command("sandbox forward", "sandbox forward NAME [LOCAL:]PORT",
                    "relay 127.0.0.1:LOCAL on this host (default LOCAL = PORT, 0 = any) to PORT on the sandbox's own"
                            + " loopback, until Ctrl-C"),
            new Command("sandbox logs", "sandbox logs NAME [--denied] [--since DURATION|TIMESTAMP]",
                    "the sandbox's kept log: the agent's output, the gateway's events and the supervisor's decisions"
                            + " (decision lines); --denied: only denials; --since 10m, 2h, 1d or 2026-12-04T18:00:00Z"),
            new Command("sandbox stop", "sandbox stop NAME", "stop every process of it (start launches it again)"),
            new Command("sandbox start", "sandbox start NAME [--no-wait]", "launch it again; waits until it runs"),
            new Command("sandbox delete", "sandbox delete NAME", "kill everything of a sandbox and remove it"),
            new Command("run", "run --policy FILE [--driver D] [--image IMAGE] [--workspace DIR] [--provider P]... [--env K=V]... -- CMD...",
                    "one shot: start a gateway if none runs (with --driver D), create a sandbox, run CMD, delete it, exit"
                            + " with CMD's exit code"),
            new Command("provider create", "provider create NAME --env VAR --host H [--host H]... (--from-env VAR | --from-stdin)",
                    "a named secret bound to hosts; the agent sees only a placeholder in VAR"),
            new Command("provider list", "provider list", "every provider (never a value)"),
            new Command("provider delete", "provider delete NAME", "remove a provider"),
            new Command("policy set", "policy set NAME --policy FILE [--wait]",
                    "replace a running sandbox's policy: sends it; with --wait prints LOADED, or FAILED (exit 1) and why"),
            new Command("policy check", "policy check --policy FILE",
                    "validate; problems with line numbers, then where this engine is stricter (DNS per binary)"),
            new Command("policy explain", """
                    policy explain --policy FILE --binary PATH [--sha256 HEX] [--ancestor PATH[@sha256:HEX]]...
                                   --host H [--address IP] --port P [--method M --path TARGET?QUERY] [--workload-root DIR]""",
                    "the decision, its rule and block, as live (docs/policy.md); exit 0 allowed, 5 denied"),
            new Command("version", "version", "the CLI's version"),
            new Command("help", "help [COMMAND...]", "the usage of a command (the same as COMMAND --help)"));

    /** The command groups; each has subcommands in {@link #COMMANDS}. */
    static final List<String> GROUPS = List.of("gateway", "sandbox", "provider", "policy");

    private Usage() {
    }

    /**
     * @param words the command line without its global options
     * @return the longest command path its first words name: a command, a group, or {@code ""}
     */
    static String path(List<String> words) {
        if (words.isEmpty()) {
            return "";
        }
        String first = words.get(0);
        if (words.size() > 1 && find(first + " " + words.get(1)) != null) {
            return first + " " + words.get(1);
        }
        return GROUPS.contains(first) || find(first) != null ? first : "";
    }

    /**
     * @param path a command path from {@link #path}
     * @return its usage: the command's, the group's list, or the overview
     */
    static String of(String path) {
        Command c = find(path);
        if (c != null) {
            return "usage: openshell " + indent(c.synopsis(), "usage: openshell ".length()) + "\n\n" + wrap(c.summary(), "")
                    + "\n\n" + GLOBAL + "\n" + EXIT_CODES;
        }
        if (GROUPS.contains(path)) {
            String subs = COMMANDS.stream().filter(s -> s.path().startsWith(path + " "))
                    .map(s -> s.path().substring(path.length() + 1)).collect(Collectors.joining("|"));
            return "usage: openshell " + path + " " + subs + " ...\n\n" + list(path + " ") + "\n" + GLOBAL
                    + "each subcommand's own usage: openshell " + path + " SUBCOMMAND --help\n";
        }
        return "usage: openshell [--state DIR] [-o text|json] COMMAND ...\n\ncommands:\n" + list("") + "\n" + GLOBAL
                + "\n" + EXIT_CODES + "\neach command's own usage: openshell COMMAND --help\n";
    }

    private static Command find(String path) {
        return COMMANDS.stream().filter(c -> c.path().equals(path)).findFirst().orElse(null);
    }

    private static String list(String prefix) {
        StringBuilder b = new StringBuilder();
        for (Command c : COMMANDS) {
            if (c.path().startsWith(prefix) || prefix.isEmpty()) {
                b.append("  ").append(indent(c.synopsis(), 2)).append('\n').append(wrap(c.summary(), "      ")).append('\n');
            }
        }
        return b.toString();
    }

    /** Continuation lines of a synopsis keep their own indentation, moved right by {@code by}. */
    private static String indent(String synopsis, int by) {
        return synopsis.strip().replace("\n", "\n" + " ".repeat(by));
    }

    /** Words wrapped at 100 columns, each line with the prefix. */
    private static String wrap(String text, String prefix) {
        StringBuilder b = new StringBuilder();
        StringBuilder line = new StringBuilder(prefix);
        for (String word : text.split(" ")) {
            if (line.length() > prefix.length() && line.length() + 1 + word.length() > 100) {
                b.append(line).append('\n');
                line = new StringBuilder(prefix);
            }
            if (line.length() > prefix.length()) {
                line.append(' ');
            }
            line.append(word);
        }
        return b.append(line).toString();
    }
}
