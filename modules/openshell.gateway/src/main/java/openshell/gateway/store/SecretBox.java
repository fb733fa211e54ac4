package openshell.gateway.store;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Base64;

import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

import openshell.gateway.GatewayException;
import openshell.gateway.GatewayException.Reason;

/**
 * Seals provider secrets before they reach the database: AES-256-GCM with a fresh 96-bit nonce per
 * value and the provider's name as associated data, so a sealed value moved to another provider
 * fails to open. The key lives in a 0600 file beside the database, never in it; replicas sharing
 * a PostgreSQL database must share the key file.
 */
public final class SecretBox {
    static final String KEY_FILE = "secrets.key";
    private static final int KEY_BYTES = 32;
    private static final int NONCE_BYTES = 12;
    private static final int TAG_BITS = 128;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final SecretKeySpec key;

    private SecretBox(byte[] key) {
        this.key = new SecretKeySpec(key, "AES");
    }

    /**
     * Loads the key, creating it (0600) on first use; refuses a key file others can read.
     *
     * @param stateDirectory the gateway's state directory
     * @return the box
     */
    public static SecretBox loadOrCreate(Path stateDirectory) {
        Path file = stateDirectory.resolve(KEY_FILE);
        try {
            if (!Files.exists(file)) {
                byte[] fresh = new byte[KEY_BYTES];
                RANDOM.nextBytes(fresh);
                try {
                    Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
                    Files.writeString(file, Base64.getEncoder().encodeToString(fresh) + "\n");
                } catch (FileAlreadyExistsException raced) {
                    // Another gateway created it first.
                }
            }
            String perms = PosixFilePermissions.toString(Files.getPosixFilePermissions(file));
            if (!perms.equals("rw-------")) {
                throw new GatewayException(Reason.INVALID, "the secrets key " + file + " has permissions " + perms
                        + "; it must be rw------- (chmod 600 it)");
            }
            byte[] key = Base64.getDecoder().decode(Files.readString(file, StandardCharsets.US_ASCII).strip());
            if (key.length != KEY_BYTES) {
                throw new GatewayException(Reason.INVALID, "the secrets key " + file + " is not a 256-bit key");
            }
            return new SecretBox(key);
        } catch (IOException | IllegalArgumentException e) {
            throw new GatewayException(Reason.UNAVAILABLE, "cannot read or create the secrets key in "
                    + stateDirectory + ": " + e.getMessage(), e);
        }
    }

    String seal(String owner, byte[] secret) {
        byte[] nonce = new byte[NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        try {
            Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
            c.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, nonce));
            c.updateAAD(owner.getBytes(StandardCharsets.UTF_8));
            byte[] sealed = c.doFinal(secret);
            byte[] out = Arrays.copyOf(nonce, NONCE_BYTES + sealed.length);
            System.arraycopy(sealed, 0, out, NONCE_BYTES, sealed.length);
            return Base64.getEncoder().encodeToString(out);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("AES-GCM is mandatory in every JDK", e);
        }
    }

    byte[] open(String owner, String sealed) {
        try {
            byte[] in = Base64.getDecoder().decode(sealed);
            Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
            c.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, in, 0, NONCE_BYTES));
            c.updateAAD(owner.getBytes(StandardCharsets.UTF_8));
            return c.doFinal(in, NONCE_BYTES, in.length - NONCE_BYTES);
        } catch (GeneralSecurityException | IllegalArgumentException e) {
            throw new GatewayException(Reason.INVALID, "the secret of provider " + owner
                    + " cannot be opened with this gateway's key (another key, or tampered)");
        }
    }

    @Override
    public String toString() {
        return "SecretBox[redacted]";
    }
}
