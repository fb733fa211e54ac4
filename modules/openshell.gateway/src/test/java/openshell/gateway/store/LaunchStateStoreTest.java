package openshell.gateway.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;
import openshell.isolation.SandboxId;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Launch specifications and the epoch ratchet, against H2 and a real PostgreSQL server. */
class LaunchStateStoreTest {

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void launchSpecIsKeptReplacedAndDeletedWithTheRecord(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord r = store.create(SandboxStoreTest.record("s1", "one"));
            assertTrue(store.launchSpec(r.id()).isEmpty());
            store.saveLaunchSpec(r.id(), "{\"argv\":[\"/bin/true\"]}");
            store.saveLaunchSpec(r.id(), "{\"argv\":[\"/bin/false\"]}");
            assertEquals("{\"argv\":[\"/bin/false\"]}", store.launchSpec(r.id()).orElseThrow());
            assertTrue(store.delete(r.id()));
            assertTrue(store.launchSpec(r.id()).isEmpty());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void launchSpecAtTheBoundIsKeptAndOneByteMoreIsRefused(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord r = store.create(SandboxStoreTest.record("s2", "two"));
            String atBound = "x".repeat(SandboxRecord.MAX_POLICY_BYTES);
            store.saveLaunchSpec(r.id(), atBound);
            assertEquals(atBound.length(), store.launchSpec(r.id()).orElseThrow().length());
            GatewayException e = assertThrows(GatewayException.class, () -> store.saveLaunchSpec(r.id(), atBound + "x"));
            assertEquals(Reason.INVALID, e.reason());
            assertEquals(atBound.length(), store.launchSpec(r.id()).orElseThrow().length());
        }
    }

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void epochRatchetsUpOnlyAndOnlyForTheCurrentGeneration(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord r = store.create(SandboxStoreTest.record("s3", "three"));
            assertEquals(5, store.raiseEpoch(r.id(), 1, 5).credentialEpoch());
            assertEquals(5, store.raiseEpoch(r.id(), 1, 3).credentialEpoch(), "never lowered");
            assertEquals(5, store.raiseEpoch(r.id(), 2, 9).credentialEpoch(), "another generation changes nothing");
            assertEquals(Reason.NOT_FOUND, assertThrows(GatewayException.class,
                    () -> store.raiseEpoch(new SandboxId("gone"), 1, 2)).reason());
        }
    }
}
