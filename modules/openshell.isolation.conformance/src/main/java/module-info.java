/**
 * The conformance kit every isolation backend must pass.
 */
module openshell.isolation.conformance {
    requires transitive openshell.isolation;
}
