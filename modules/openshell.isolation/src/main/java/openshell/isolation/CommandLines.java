package openshell.isolation;

import java.util.List;
import java.util.Map;

/** Validation shared by {@link AgentSpec} and {@link ExecSpec}: what a kernel execve can take. */
final class CommandLines {
    private CommandLines() {
    }

    static List<String> argv(List<String> argv, int max) {
        BackendException.require(argv, "argv");
        if (argv.isEmpty()) {
            throw BackendException.invalid("argv must name a program");
        }
        if (argv.size() > max) {
            throw BackendException.invalid("argv has " + argv.size() + " entries; at most " + max);
        }
        for (String arg : argv) {
            noNul(BackendException.require(arg, "argument"), "argument");
        }
        if (argv.getFirst().isEmpty()) {
            throw BackendException.invalid("argv[0] must not be empty");
        }
        return List.copyOf(argv);
    }

    static Map<String, String> environment(Map<String, String> env, int max) {
        BackendException.require(env, "environment");
        if (env.size() > max) {
            throw BackendException.invalid("environment has " + env.size() + " entries; at most " + max);
        }
        for (Map.Entry<String, String> e : env.entrySet()) {
            String name = BackendException.require(e.getKey(), "environment name");
            noNul(BackendException.require(e.getValue(), "environment value of " + name), "environment value");
            if (name.isEmpty() || name.indexOf('=') >= 0 || name.indexOf('\0') >= 0) {
                throw BackendException.invalid("invalid environment name '" + name + "'");
            }
        }
        return Map.copyOf(env);
    }

    static String directory(String dir) {
        BackendException.require(dir, "working directory");
        noNul(dir, "working directory");
        if (!dir.startsWith("/")) {
            throw BackendException.invalid("working directory must be absolute: '" + dir + "'");
        }
        return dir;
    }

    private static void noNul(String s, String what) {
        if (s.indexOf('\0') >= 0) {
            throw BackendException.invalid(what + " contains a NUL character");
        }
    }
}
