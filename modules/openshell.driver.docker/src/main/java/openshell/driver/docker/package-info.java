/** The Docker driver; nothing here is exported. */
package openshell.driver.docker;
