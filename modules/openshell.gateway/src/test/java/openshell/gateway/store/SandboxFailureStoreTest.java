package openshell.gateway.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;

import openshell.isolation.SandboxSessionId;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Why and when a launch failed, on both databases: written only over the record version the
 * observer read and only from PROVISIONING or RUNNING, shown only for the launch that failed,
 * cut at its bound, and gone with the sandbox.
 */
class SandboxFailureStoreTest {
    private static final Instant AT = Instant.parse("2026-12-03T18:30:00Z");

    @ParameterizedTest
    @MethodSource("openshell.gateway.store.TestDatabases#all")
    void aFailureIsConditionalBelongsToItsLaunchAndGoesWithTheSandbox(TestDatabases.Database db) throws Exception {
        try (SandboxStore store = SandboxStore.open(TestDatabases.fresh(db))) {
            SandboxRecord running = store.create(SandboxStoreTest.record("sb-fail", "fail").withState(SandboxState.RUNNING));
            SandboxRecord failed = store.fail(running, new SandboxFailure(1, "x".repeat(SandboxFailure.MAX_CAUSE_CHARS + 10), AT))
                    .orElseThrow();
            assertEquals(SandboxState.FAILED, failed.state());
            assertEquals(AT, failed.updatedAt());
            SandboxFailure why = store.failure(failed).orElseThrow();
            assertEquals(SandboxFailure.MAX_CAUSE_CHARS, why.cause().length(), "cut at its bound");
            assertEquals(AT, why.failedAt());
            assertEquals(why, store.failures().get("sb-fail"));

            // Once FAILED (or at another version) nothing more is written.
            assertTrue(store.fail(failed, new SandboxFailure(1, "again", AT)).isEmpty());
            assertTrue(store.fail(running, new SandboxFailure(1, "stale", AT)).isEmpty());

            // A new launch (start) does not carry the old launch's cause.
            SandboxRecord relaunched = store.update(failed.relaunched(SandboxSessionId.fresh().value())
                    .withState(SandboxState.PROVISIONING));
            assertTrue(store.failure(relaunched).isEmpty());
            assertTrue(store.failure(store.setState(relaunched.id(), SandboxState.FAILED)).isEmpty(),
                    "FAILED by another path in generation 2: no cause of generation 1 is shown");

            store.delete(relaunched.id());
            assertTrue(store.failures().isEmpty(), "gone with the sandbox");
        }
    }
}
