/** What a driver module implements and registers. */
package openshell.driver.spi;
