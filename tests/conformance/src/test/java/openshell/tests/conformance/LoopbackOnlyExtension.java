package openshell.tests.conformance;

import openshell.isolation.conformance.LoopbackOnly;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Registered for every test class of this module (JUnit's extension autodetection, the pom turns
 * it on; {@code provides} in the module descriptor): a class run outside the loopback-only network
 * namespace fails before it starts anything, whoever wrote it and however it was launched.
 */
public final class LoopbackOnlyExtension implements BeforeAllCallback {
    /** For the service loader. */
    public LoopbackOnlyExtension() {
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        LoopbackOnly.assertInForce();
    }
}
