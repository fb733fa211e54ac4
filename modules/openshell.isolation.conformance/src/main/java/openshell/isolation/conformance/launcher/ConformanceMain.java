package openshell.isolation.conformance.launcher;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

/**
 * Runs the kit from the command line against one registered backend:
 * {@code java -p <module path> -m openshell.isolation.conformance/openshell.isolation.conformance.launcher.ConformanceMain --backend <name>}.
 * The module path holds the kit, JUnit, the backend and a module that {@code provides} its
 * {@link openshell.isolation.conformance.ConformanceTarget}. Exit status: 0 when every check
 * passed, 1 when any failed, 2 for a usage error or an unknown backend.
 */
public final class ConformanceMain {
    private ConformanceMain() {
    }

    /**
     * @param args {@code --backend <name>} or {@code --list}
     */
    public static void main(String[] args) {
        System.exit(run(List.of(args), System.out, System.err));
    }

    static int run(List<String> args, PrintStream out, PrintStream err) {
        if (args.equals(List.of("--list"))) {
            TargetLookup.registered().forEach(t -> out.println(t.backend()));
            return 0;
        }
        if (args.size() != 2 || !args.getFirst().equals("--backend")) {
            err.println("usage: ConformanceMain --backend <name> | --list");
            return 2;
        }
        String name = args.get(1);
        try {
            TargetLookup.byName(name);
        } catch (IllegalArgumentException e) {
            err.println(e.getMessage());
            return 2;
        }
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectClass(SelectedBackendConformance.class))
                .configurationParameter(TargetLookup.BACKEND_PARAMETER, name)
                .build();
        Report report = new Report(out);
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, report);
        out.printf("conformance of %s: %d passed, %d failed%n", name, report.passed.get(), report.failed.get());
        return report.failed.get() == 0 && report.passed.get() > 0 ? 0 : 1;
    }

    /** One line per check, with the reason of each failure. */
    private static final class Report implements TestExecutionListener {
        private final PrintStream out;
        private final AtomicInteger passed = new AtomicInteger();
        private final AtomicInteger failed = new AtomicInteger();

        Report(PrintStream out) {
            this.out = out;
        }

        @Override
        public void executionFinished(TestIdentifier test, TestExecutionResult result) {
            boolean check = test.isTest();
            if (result.getStatus() == TestExecutionResult.Status.SUCCESSFUL) {
                if (check) {
                    passed.incrementAndGet();
                    out.println("PASS " + test.getDisplayName());
                }
                return;
            }
            failed.incrementAndGet();
            out.println("FAIL " + test.getDisplayName() + ": "
                    + result.getThrowable().map(Throwable::getMessage).orElse(result.getStatus().toString()));
        }
    }
}
