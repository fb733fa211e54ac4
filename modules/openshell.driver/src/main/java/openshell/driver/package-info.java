/** What the gateway holds of a compute driver: the driver, its inputs and what it records. */
package openshell.driver;
