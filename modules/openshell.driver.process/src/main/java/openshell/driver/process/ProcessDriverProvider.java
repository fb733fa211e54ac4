package openshell.driver.process;

import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;
import openshell.driver.spi.ComputeDriverProvider;

/** Registers the process driver under the name {@code process}. */
public final class ProcessDriverProvider implements ComputeDriverProvider {
    /** Used by the service loader. */
    public ProcessDriverProvider() {
    }

    @Override
    public String name() {
        return ProcessDriver.NAME;
    }

    @Override
    public ComputeDriver create(DriverEnvironment environment) {
        return new ProcessDriver(environment);
    }
}
