/**
 * Durable sandbox records: everything a restarted gateway needs to find its sandboxes again and to
 * refuse an old token (descriptor, dial direction, runtime generation, credential epoch, lineage).
 */
package openshell.gateway.store;
