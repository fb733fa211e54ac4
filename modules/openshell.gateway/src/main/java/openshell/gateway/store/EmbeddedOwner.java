package openshell.gateway.store;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;

/**
 * The embedded H2 store serves one gateway process: replicas need PostgreSQL. A second gateway
 * pointed at the same H2 file must fail at start and say which gateway has it, instead of H2's
 * own "database may be already in use". The owner holds an exclusive lock on
 * {@code <database file>.owner} (0600, holding its pid; the error adds the address its state
 * directory's {@code gateway.json} announces for that pid) for as long as its store is open; the operating system drops the lock with
 * the process, so a killed gateway never leaves it behind.
 */
final class EmbeddedOwner implements AutoCloseable {
    static final String SUFFIX = ".owner";
    private static final Pattern URL = Pattern.compile("\"url\"\\s*:\\s*\"([^\"]{1,512})\"");

    private final FileChannel channel;
    private final FileLock lock;

    private EmbeddedOwner(FileChannel channel, FileLock lock) {
        this.channel = channel;
        this.lock = lock;
    }

    /**
     * @param jdbcUrl a {@code jdbc:h2:file:PATH} URL
     * @return the lock, held until {@link #close()}
     * @throws GatewayException CONFLICT naming the gateway that has it
     */
    static EmbeddedOwner take(String jdbcUrl) {
        String path = jdbcUrl.substring("jdbc:h2:file:".length());
        int options = path.indexOf(';');
        Path database = Path.of(options < 0 ? path : path.substring(0, options)).toAbsolutePath();
        Path file = database.resolveSibling(database.getFileName() + SUFFIX);
        try {
            Files.createDirectories(file.getParent());
            if (!Files.exists(file)) {
                try {
                    Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
                } catch (java.nio.file.FileAlreadyExistsException raced) {
                    // Another gateway made it first; the lock decides.
                }
            }
            FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            FileLock lock;
            try {
                lock = channel.tryLock();
            } catch (OverlappingFileLockException sameProcess) {
                lock = null;
            }
            if (lock == null) {
                String pid = new String(Files.readAllBytes(file), StandardCharsets.UTF_8).strip();
                channel.close();
                String owner = pid.matches("\\d{1,19}") ? "the gateway with pid " + pid
                        + address(database.getParent(), pid).map(a -> " listening on " + a).orElse("") : "another gateway";
                throw new GatewayException(Reason.CONFLICT, "the embedded database " + database + " is in use by "
                        + owner + "; the embedded H2 store serves one gateway "
                        + "only: for several replicas give each its own --state and one shared --database-url "
                        + "jdbc:postgresql://...");
            }
            channel.truncate(0);
            channel.write(ByteBuffer.wrap(Long.toString(ProcessHandle.current().pid()).getBytes(StandardCharsets.UTF_8)), 0);
            channel.force(false);
            return new EmbeddedOwner(channel, lock);
        } catch (IOException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "cannot lock the embedded database " + database + ": "
                    + e.getMessage(), e);
        }
    }

    /** The address the owner announced in its state directory's {@code gateway.json}, if that names its pid. */
    private static Optional<String> address(Path stateDirectory, String pid) {
        try {
            String json = Files.readString(stateDirectory.resolve("gateway.json"));
            Matcher m = URL.matcher(json);
            return m.find() && json.matches("(?s).*\"pid\"\\s*:\\s*" + pid + "\\D.*") ? Optional.of(m.group(1))
                    : Optional.empty();
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    @Override
    public void close() {
        try {
            lock.release();
            channel.close();
        } catch (IOException ignored) {
            // Closing the channel drops the lock in any case.
        }
    }
}
