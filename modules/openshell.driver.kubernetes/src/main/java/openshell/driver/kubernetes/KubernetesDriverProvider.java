package openshell.driver.kubernetes;

import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.spi.ComputeDriverProvider;

/** Makes the Kubernetes driver available as {@code kubernetes}. */
public final class KubernetesDriverProvider implements ComputeDriverProvider {
    /** The driver's name. */
    static final String NAME = "kubernetes";

    /** For the service loader. */
    public KubernetesDriverProvider() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public ComputeDriver create(DriverEnvironment environment) {
        return KubernetesDriver.open(environment);
    }
}
