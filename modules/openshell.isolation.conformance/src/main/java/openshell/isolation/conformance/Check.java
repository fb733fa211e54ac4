package openshell.isolation.conformance;

/**
 * One named check of the kit. The name is stable: backends and the kit's self-tests refer to it.
 *
 * @param name e.g. {@code lifecycle.start-twice-refused}
 * @param body what it does with a fresh workbench
 */
record Check(String name, Body body) {
    /** A check's work; everything it opens goes through the workbench, which releases it. */
    @FunctionalInterface
    interface Body {
        void run(Workbench bench) throws Throwable;
    }
}
