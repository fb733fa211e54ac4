/** The gateway program; nothing here is exported. */
package openshell.gateway;
