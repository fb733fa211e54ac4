/**
 * Black-box tests of the policy engine through its exported API only: the decision table kept as
 * data under {@code cases/}, the example policies, and the decisions-per-second harness.
 */
open module openshell.tests.policy {
    requires openshell.policy;
    requires org.yaml.snakeyaml;
    requires org.junit.jupiter.api;
    requires java.management;
}
