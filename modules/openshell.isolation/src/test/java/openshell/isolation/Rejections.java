package openshell.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.function.Executable;

/** Asserts the kind of a refusal: the kind is the contract, the message is for humans. */
final class Rejections {
    private Rejections() {
    }

    static BackendException expect(BackendException.Kind kind, Executable call) {
        BackendException e = assertThrows(BackendException.class, call);
        assertEquals(kind, e.kind(), e.getMessage());
        return e;
    }

    static BackendException invalid(Executable call) {
        return expect(BackendException.Kind.INVALID, call);
    }
}
