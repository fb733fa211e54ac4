/** The container drivers' shared parts: names, labels, fence, ownership, identity, staging. */
package openshell.driver.container;
