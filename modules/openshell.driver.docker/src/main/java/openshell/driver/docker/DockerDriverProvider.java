package openshell.driver.docker;

import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.spi.ComputeDriverProvider;

/** Registers the Docker driver under the name {@code docker}. */
public final class DockerDriverProvider implements ComputeDriverProvider {
    /** Used by the service loader. */
    public DockerDriverProvider() {
    }

    @Override
    public String name() {
        return DockerDriver.NAME;
    }

    @Override
    public ComputeDriver create(DriverEnvironment environment) {
        return new DockerDriver(environment);
    }
}
