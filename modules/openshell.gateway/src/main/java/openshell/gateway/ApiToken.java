package openshell.gateway;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.Set;

/**
 * The bearer token users of the gateway's API present. Generated at first start (256 random bits)
 * into {@code <state>/api-token} with permissions 0600; a token file anyone else can read is
 * refused rather than trusted. Comparison is constant-time.
 */
final class ApiToken {
    static final String FILE = "api-token";
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rw-------");
    private static final int BYTES = 32;

    private final byte[] value;

    private ApiToken(byte[] value) {
        this.value = value;
    }

    /**
     * Loads the token, creating it on first start.
     *
     * @param stateDirectory the gateway's state directory
     * @return the token
     * @throws GatewayException INVALID if the file is readable by others or malformed
     */
    static ApiToken loadOrCreate(Path stateDirectory) {
        Path file = stateDirectory.resolve(FILE);
        try {
            if (!Files.exists(file)) {
                byte[] random = new byte[BYTES];
                new SecureRandom().nextBytes(random);
                String token = Base64.getUrlEncoder().withoutPadding().encodeToString(random);
                try {
                    // Created with 0600 in one step: there is no moment where others could read it.
                    Files.createFile(file, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
                    Files.writeString(file, token + "\n");
                } catch (FileAlreadyExistsException raced) {
                    // Another gateway process created it first; use theirs.
                }
            }
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(file);
            if (!perms.equals(OWNER_ONLY)) {
                throw new GatewayException(GatewayException.Reason.INVALID, "the API token file " + file
                        + " has permissions " + PosixFilePermissions.toString(perms)
                        + "; it must be rw------- (chmod 600 it, or delete it to get a new token)");
            }
            String token = Files.readString(file, StandardCharsets.US_ASCII).strip();
            if (token.length() < 32) {
                throw new GatewayException(GatewayException.Reason.INVALID, "the API token in " + file
                        + " is too short; delete the file to get a new token");
            }
            return new ApiToken(token.getBytes(StandardCharsets.US_ASCII));
        } catch (IOException e) {
            throw new GatewayException(GatewayException.Reason.UNAVAILABLE, "cannot read or create the API token in "
                    + stateDirectory + ": " + e.getMessage(), e);
        }
    }

    /**
     * @param authorization the request's {@code Authorization} header value
     * @return whether it carries this token
     */
    boolean admits(String authorization) {
        if (authorization == null || !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return false;
        }
        byte[] presented = authorization.substring(7).strip().getBytes(StandardCharsets.US_ASCII);
        return MessageDigest.isEqual(presented, value);
    }

    @Override
    public String toString() {
        return "ApiToken[redacted]";
    }
}
