package openshell.gateway.store;

/** A stored-shape sandbox record for tests outside this package. */
public final class SandboxRecordFixture {
    private SandboxRecordFixture() {
    }

    /**
     * @param id   the sandbox id
     * @param name its name
     * @return a PROVISIONING record of version 1
     */
    public static SandboxRecord record(String id, String name) {
        return SandboxStoreTest.record(id, name);
    }
}
