/** What a backend module implements and registers: the provider service, and shared handle state. */
package openshell.isolation.spi;
