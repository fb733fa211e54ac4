package openshell.driver.process;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.isolation.SandboxId;

/**
 * Hands out id-range slots: slot {@code n} is taken when the file {@code slots/n} exists, created
 * atomically, so two gateways sharing a state root can never give two sandboxes one range.
 */
final class SlotAllocator {
    private final Path slots;

    SlotAllocator(Path slots) {
        this.slots = slots;
    }

    int take(SandboxId owner) {
        try {
            Files.createDirectories(slots);
            for (int slot = 0; slot < IdRange.MAX_SLOTS; slot++) {
                try {
                    Files.writeString(Files.createFile(slots.resolve(Integer.toString(slot))), owner.value(),
                            StandardCharsets.UTF_8);
                    return slot;
                } catch (FileAlreadyExistsException taken) {
                    // next slot
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot allocate an id range in " + slots + ": " + e.getMessage(), e);
        }
        throw new DriverException(Kind.UNAVAILABLE, "every one of the " + IdRange.MAX_SLOTS + " id ranges is in use");
    }

    void release(int slot, SandboxId owner) {
        Path file = slots.resolve(Integer.toString(slot));
        try {
            if (Files.exists(file) && Files.readString(file, StandardCharsets.UTF_8).equals(owner.value())) {
                Files.delete(file);
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot release id range slot " + slot + ": " + e.getMessage(), e);
        }
    }
}
