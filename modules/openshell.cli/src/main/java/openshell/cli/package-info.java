/** The openshell command; nothing here is exported. */
package openshell.cli;
