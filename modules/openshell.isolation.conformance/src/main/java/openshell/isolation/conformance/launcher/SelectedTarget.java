package openshell.isolation.conformance.launcher;

import openshell.isolation.conformance.ConformanceTarget;

import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/** Resolves the target named by {@value TargetLookup#BACKEND_PARAMETER}; without one, the run fails. */
final class SelectedTarget implements ParameterResolver {
    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == ConformanceTarget.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        String name = context.getConfigurationParameter(TargetLookup.BACKEND_PARAMETER)
                .orElseThrow(() -> new ExtensionConfigurationException("set " + TargetLookup.BACKEND_PARAMETER
                        + " to the backend under test"));
        try {
            return TargetLookup.byName(name);
        } catch (IllegalArgumentException e) {
            throw new ExtensionConfigurationException(e.getMessage(), e);
        }
    }
}
