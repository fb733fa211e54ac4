package openshell.driver.process;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.isolation.SandboxId;

/**
 * Hands out id-range slots: slot {@code n} is taken when the file {@code n} exists in the slot
 * directory, created atomically. The directory is one per host (not per gateway state): two
 * gateways on one host, with different state roots, must never give two sandboxes one uid range,
 * or the workload of one could read the other's files and signal its processes. A slot file names
 * its owner as the gateway's state root and the sandbox id, so one gateway never frees another's.
 * Before slots were per host they lived in the driver's state root ({@link #LEGACY_DIRECTORY},
 * holding the sandbox id): a slot taken there is still taken, until that sandbox is deleted, so a
 * sandbox that outlived an upgrade never shares its range with a new one.
 */
final class SlotAllocator {
    /** The per-state slot directory of earlier versions, under the driver's state root. */
    static final String LEGACY_DIRECTORY = "slots";

    private final Path slots;
    private final Path stateRoot;
    private final Path legacy;

    /**
     * @param slots     the host's slot directory
     * @param stateRoot the owning driver's state root (part of each slot's owner)
     */
    SlotAllocator(Path slots, Path stateRoot) {
        this.slots = slots;
        this.stateRoot = stateRoot.toAbsolutePath().normalize();
        this.legacy = this.stateRoot.resolve(LEGACY_DIRECTORY);
    }

    private String owner(SandboxId id) {
        return stateRoot + "\n" + id.value() + "\n";
    }

    int take(SandboxId owner) {
        try {
            Files.createDirectories(slots);
            for (int slot = 0; slot < IdRange.MAX_SLOTS; slot++) {
                if (Files.exists(legacy.resolve(Integer.toString(slot)))) {
                    continue;
                }
                try {
                    Files.writeString(Files.createFile(slots.resolve(Integer.toString(slot))), owner(owner),
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

    /**
     * Gives a slot to another owner (a warm spare's to the sandbox that took the spare).
     *
     * @throws DriverException FAILED if the slot is not {@code from}'s
     */
    void transfer(int slot, SandboxId from, SandboxId to) {
        Path file = slots.resolve(Integer.toString(slot));
        try {
            if (!Files.exists(file) || !Files.readString(file, StandardCharsets.UTF_8).equals(owner(from))) {
                throw new DriverException(Kind.FAILED, "id range slot " + slot + " is not " + from + "'s");
            }
            // Written beside and renamed over the slot file: the slot is taken throughout.
            Path next = slots.resolve(slot + ".transfer");
            Files.writeString(next, owner(to), StandardCharsets.UTF_8);
            Files.move(next, file, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot give id range slot " + slot + " to " + to + ": " + e.getMessage(), e);
        }
    }

    /** @return the slots {@code owner} holds (a spare whose slot number was never recorded) */
    List<Integer> held(SandboxId owner) {
        if (!Files.isDirectory(slots)) {
            return List.of();
        }
        List<Integer> held = new ArrayList<>();
        try (java.util.stream.Stream<Path> files = Files.list(slots)) {
            for (Path file : files.toList()) {
                String name = file.getFileName().toString();
                if (!name.isEmpty() && name.length() < 10 && name.chars().allMatch(Character::isDigit)
                        && Files.readString(file, StandardCharsets.UTF_8).equals(owner(owner))) {
                    held.add(Integer.parseInt(name));
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot list the id ranges of " + owner + ": " + e.getMessage(), e);
        }
        return held;
    }

    /**
     * A slot whose owner can never release it: the gateway state root it names is gone (a test's
     * temporary state removed after its gateway was killed, an operator who deleted the state).
     *
     * @param slot  the slot number
     * @param owner the sandbox or spare that held it
     */
    record Abandoned(int slot, SandboxId owner) {
    }

    /**
     * @return the slots of this host whose owner's state root no longer exists, lowest first; slot
     *         files that are not this allocator's shape are left alone
     */
    List<Abandoned> abandoned() {
        if (!Files.isDirectory(slots)) {
            return List.of();
        }
        List<Abandoned> found = new ArrayList<>();
        try (java.util.stream.Stream<Path> files = Files.list(slots)) {
            for (Path file : files.sorted().toList()) {
                String name = file.getFileName().toString();
                if (name.isEmpty() || name.length() >= 10 || !name.chars().allMatch(Character::isDigit)) {
                    continue;
                }
                List<String> lines;
                try {
                    lines = Files.readAllLines(file, StandardCharsets.UTF_8);
                } catch (java.nio.file.NoSuchFileException released) {
                    continue;
                }
                if (lines.size() != 2 || !lines.get(0).startsWith("/")) {
                    continue;
                }
                SandboxId owner;
                try {
                    owner = new SandboxId(lines.get(1));
                } catch (RuntimeException notAnId) {
                    continue;
                }
                if (!Files.isDirectory(Path.of(lines.get(0)))) {
                    found.add(new Abandoned(Integer.parseInt(name), owner));
                }
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot list the id ranges in " + slots + ": " + e.getMessage(), e);
        }
        found.sort(java.util.Comparator.comparingInt(Abandoned::slot));
        return found;
    }

    /**
     * Frees an abandoned slot, if it still names the same owner (the check and the delete are not
     * atomic, but only a slot whose owner's state root is gone is ever freed, and nothing writes
     * such a slot again).
     */
    void releaseAbandoned(Abandoned a) {
        Path file = slots.resolve(Integer.toString(a.slot()));
        try {
            List<String> lines = Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : List.of();
            if (lines.size() == 2 && lines.get(1).equals(a.owner().value()) && !Files.isDirectory(Path.of(lines.get(0)))) {
                Files.delete(file);
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot release id range slot " + a.slot() + ": " + e.getMessage(), e);
        }
    }

    /** Releases every slot {@code owner} holds. */
    void releaseAll(SandboxId owner) {
        for (int slot : held(owner)) {
            release(slot, owner);
        }
    }

    void release(int slot, SandboxId owner) {
        Path file = slots.resolve(Integer.toString(slot));
        try {
            if (Files.exists(file) && Files.readString(file, StandardCharsets.UTF_8).equals(owner(owner))) {
                Files.delete(file);
            }
            Path old = legacy.resolve(Integer.toString(slot));
            if (Files.exists(old) && Files.readString(old, StandardCharsets.UTF_8).strip().equals(owner.value())) {
                Files.delete(old);
            }
        } catch (IOException e) {
            throw new DriverException(Kind.FAILED, "cannot release id range slot " + slot + ": " + e.getMessage(), e);
        }
    }
}
