/**
 * The compute-driver SPI: how the gateway provisions a sandbox's topology (execution environment,
 * protected channel, outer network fence), starts and stops it, and cleans it up through a
 * trusted path that works even when the supervisor is gone.
 *
 * <p>Drivers are services ({@code provides openshell.driver.spi.ComputeDriverProvider}); the
 * gateway finds them through {@link openshell.driver.DriverRegistry} by exact name and never
 * branches on a driver's name. Which driver a sandbox gets is decided by admission from trusted
 * configuration, never by the policy or any other request input.
 *
 * <p>{@link openshell.driver.DriverStatus} is what the driver observes now, whatever the gateway
 * recorded. A driver that can tell the parts apart (supervisor, runtime, namespaces, workload)
 * reports each once something is gone: the gateway records a sandbox FAILED as soon as its
 * workload is seen ended, and ends a workload nothing else would end; for a driver that cannot
 * tell, it waits for the runtime's bound first.
 *
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code Provisioned.MAX_STATE_BYTES}</td><td>64 KiB</td><td>INVALID</td></tr>
 * <tr><td>{@code LaunchPlan.MAX_OPTIONS}</td><td>32</td><td>INVALID</td></tr>
 * </table>
 */
module openshell.driver {
    requires transitive openshell.isolation;

    exports openshell.driver;
    exports openshell.driver.spi;

    uses openshell.driver.spi.ComputeDriverProvider;
}
