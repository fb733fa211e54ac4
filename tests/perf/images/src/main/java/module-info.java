/**
 * The runtime images' benchmark (issue 8): sizes, start-up with and without the AOT cache, and
 * resident memory, measured on the images jlink/ built, launched as the gateway launches them
 * (the process driver, launch bundles minted as the gateway mints them). A harness writing JSON,
 * never a test: budgets are reported, not asserted.
 */
module openshell.perf.images {
    requires openshell.driver;
    requires openshell.protocol;
    // It mints launch bundles, and openshell.protocol requires BouncyCastle only statically.
    requires org.bouncycastle.pkix;
    requires org.bouncycastle.provider;
}
