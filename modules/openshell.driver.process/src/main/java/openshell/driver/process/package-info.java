/** The process driver; nothing here is exported. */
package openshell.driver.process;
