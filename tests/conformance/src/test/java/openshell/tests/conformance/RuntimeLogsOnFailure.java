package openshell.tests.conformance;

import java.lang.reflect.Method;
import org.junit.jupiter.api.extension.DynamicTestInvocationContext;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.InvocationInterceptor;
import org.junit.jupiter.api.extension.ReflectiveInvocationContext;

/**
 * Attaches the runtime logs of the launches a failing check made to its failure, so that CI's
 * log shows the runtime's side of a failure (a link that closed, a workload that died) without a
 * rerun: the driver's cleanup removes the files before anyone could look.
 */
final class RuntimeLogsOnFailure implements InvocationInterceptor {
    @Override
    public void interceptDynamicTest(Invocation<Void> invocation, DynamicTestInvocationContext invocationContext,
                                     ExtensionContext extensionContext) throws Throwable {
        withLogs(invocation);
    }

    @Override
    public void interceptTestMethod(Invocation<Void> invocation, ReflectiveInvocationContext<Method> invocationContext,
                                    ExtensionContext extensionContext) throws Throwable {
        withLogs(invocation);
    }

    private static void withLogs(Invocation<Void> invocation) throws Throwable {
        long since = System.nanoTime();
        try {
            invocation.proceed();
        } catch (org.opentest4j.TestAbortedException e) {
            throw e;
        } catch (Throwable t) {
            AssertionError withLogs = new AssertionError(t.getMessage() + RuntimeLaunches.shared().runtimeLogsSince(since), t);
            throw withLogs;
        }
    }
}
