package openshell.driver.spi;

import openshell.driver.ComputeDriver;
import openshell.driver.DriverEnvironment;

/** A service making one compute driver available under its exact name. */
public interface ComputeDriverProvider {
    /** @return the driver's name */
    String name();

    /**
     * @param environment the gateway's trusted configuration for drivers
     * @return a driver whose {@link ComputeDriver#name()} equals {@link #name()}
     */
    ComputeDriver create(DriverEnvironment environment);
}
