/** The Kubernetes compute driver; see the module documentation. */
package openshell.driver.kubernetes;
