/**
 * The Isolation Backend contract: typestate handles for one boundary's lifecycle, the processes and
 * connections it exposes, and the mediation source that carries every way out of it.
 */
package openshell.isolation;
