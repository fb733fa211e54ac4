package openshell.gateway;

import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.X509EncodedKeySpec;
import java.time.Clock;
import java.util.Base64;
import java.util.HexFormat;
import java.util.Set;

import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import openshell.protocol.TokenIssuer;

/**
 * The gateway's persistent ES256 signing key for launch tokens, in {@code <state>/signing-key}
 * (0600). One key across restarts, so a supervisor whose tokens were minted before a restart can
 * still open its session afterwards. Generated at first start; a file others can read is refused;
 * the key itself is never logged or printed.
 */
final class SigningKey {
    static final String FILE = "signing-key";
    /** The {@code iss} of every token this gateway mints. */
    static final String ISSUER = "openshell-gateway";
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rw-------");

    private SigningKey() {
    }

    /**
     * @param stateDirectory the gateway's state directory (0700)
     * @param clock          the issuing clock
     * @return an issuer over the persisted key
     * @throws GatewayException INVALID if the file is readable by others or damaged
     */
    static TokenIssuer loadOrCreate(Path stateDirectory, Clock clock) {
        Path file = stateDirectory.resolve(FILE);
        try {
            if (!Files.exists(file)) {
                create(file);
            }
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(file);
            if (!perms.equals(OWNER_ONLY)) {
                throw new GatewayException(GatewayException.Reason.INVALID, "the signing key file " + file
                        + " has permissions " + PosixFilePermissions.toString(perms)
                        + "; it must be rw------- (chmod 600 it)");
            }
            JsonObject json;
            try (JsonReader r = Json.createReader(new StringReader(Files.readString(file, StandardCharsets.US_ASCII)))) {
                json = r.readObject();
            }
            KeyFactory ec = KeyFactory.getInstance("EC");
            KeyPair keys = new KeyPair(
                    ec.generatePublic(new X509EncodedKeySpec(Base64.getDecoder().decode(json.getString("public")))),
                    ec.generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(json.getString("private")))));
            return TokenIssuer.of(ISSUER, keyId(keys), keys, clock);
        } catch (IOException e) {
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "cannot read or create the signing key in "
                    + stateDirectory + ": " + e.getMessage(), e);
        } catch (GeneralSecurityException | RuntimeException e) {
            if (e instanceof GatewayException g) {
                throw g;
            }
            // The message of a key parser may quote key bytes: never pass it on.
            throw new GatewayException(GatewayException.Reason.INVALID, "the signing key in " + file
                    + " is damaged; move it away to make a new one (running sandboxes then need a restart)");
        }
    }

    private static void create(Path file) throws IOException, GeneralSecurityException {
        KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"), new SecureRandom());
        KeyPair keys = generator.generateKeyPair();
        String json = Json.createObjectBuilder()
                .add("alg", "ES256")
                .add("public", Base64.getEncoder().encodeToString(keys.getPublic().getEncoded()))
                .add("private", Base64.getEncoder().encodeToString(keys.getPrivate().getEncoded()))
                .build().toString();
        // Written to a 0600 temporary file and moved in place: no moment where others could read it,
        // and a second gateway starting at once never sees half a key.
        Path tmp = Files.createTempFile(file.getParent(), ".signing-key", ".tmp",
                PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        try {
            Files.writeString(tmp, json + "\n", StandardCharsets.US_ASCII);
            try {
                Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
            } catch (java.nio.file.FileAlreadyExistsException raced) {
                // Another gateway process made it first; use theirs.
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** The key id: the first 16 bytes of the public key's SHA-256, so a new key never reuses an id. */
    static String keyId(KeyPair keys) throws GeneralSecurityException {
        byte[] digest = MessageDigest.getInstance("SHA-256").digest(keys.getPublic().getEncoded());
        return HexFormat.of().formatHex(digest, 0, 16);
    }
}
