/**
 * The policy model, its YAML loader and validator, and the decision engine.
 */
module openshell.policy {
    requires openshell.isolation;
}
