package openshell.cli;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The options every command takes, taken out of the command line wherever they stand before
 * {@code --} (after it everything is the agent's or the command's own): {@code --state DIR},
 * {@code -o}/{@code --output text|json} (also {@code --output=json}; {@code human} is kept as a
 * synonym of {@code text}; the last one given wins) and {@code -h}/{@code --help}. An unknown
 * format, or one of these without its value, is a usage error, never ignored; it is kept in
 * {@link #problem} so that the error can still name the command it was given to.
 *
 * @param state   the state directory given, if any
 * @param json    whether results are one JSON document
 * @param help    whether the command's usage was asked for
 * @param rest    the command line without these options, {@code --} and what follows it included
 * @param problem what was wrong with these options, if anything
 */
record GlobalOptions(Optional<Path> state, boolean json, boolean help, List<String> rest, Optional<String> problem) {
    /** The separator after which nothing is an option of the CLI. */
    static final String END = "--";

    static GlobalOptions parse(List<String> args) {
        Optional<Path> state = Optional.empty();
        boolean json = false;
        boolean help = false;
        List<String> rest = new ArrayList<>();
        String problem = null;
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            if (a.equals(END)) {
                rest.addAll(args.subList(i, args.size()));
                break;
            }
            boolean isState = a.equals("--state") || a.startsWith("--state=");
            boolean isOutput = a.equals("-o") || a.equals("--output") || a.startsWith("--output=");
            if (a.equals("-h") || a.equals("--help")) {
                help = true;
                continue;
            }
            if (!isState && !isOutput) {
                rest.add(a);
                continue;
            }
            String value;
            int eq = a.indexOf('=');
            if (eq > 0) {
                value = a.substring(eq + 1);
            } else if (i + 1 < args.size() && !args.get(i + 1).equals(END)) {
                value = args.get(++i);
            } else {
                problem = problem != null ? problem : a + " needs a value" + (isState ? " (a directory)" : " (text or json)");
                continue;
            }
            if (isState) {
                state = Optional.of(Path.of(value).toAbsolutePath());
            } else if (value.equals("json")) {
                json = true;
            } else if (value.equals("text") || value.equals("human")) {
                json = false;
            } else {
                problem = problem != null ? problem : (eq > 0 ? a.substring(0, eq) : a) + " takes text or json, not '"
                        + value + "'";
            }
        }
        return new GlobalOptions(state, json, help, List.copyOf(rest), Optional.ofNullable(problem));
    }
}
