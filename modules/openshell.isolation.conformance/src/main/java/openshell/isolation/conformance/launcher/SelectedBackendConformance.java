package openshell.isolation.conformance.launcher;

import java.util.stream.Stream;

import openshell.isolation.conformance.ConformanceTarget;
import openshell.isolation.conformance.IsolationConformance;

import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.extension.ExtendWith;

/** The kit's checks against the backend the launcher named in its configuration. */
@ExtendWith(SelectedTarget.class)
class SelectedBackendConformance {
    @TestFactory
    Stream<DynamicNode> isolationConformance(ConformanceTarget target) {
        return IsolationConformance.checks(target);
    }
}
