package openshell.protocol;

import java.util.regex.Pattern;

/**
 * The TLS server name of a session, {@code sandbox.<session-id>.openshell.internal}. Its own class,
 * apart from {@link LaunchTls}, because the runtime checks it when it reads its bundle and must
 * not link the minting code: {@code LaunchTls} needs BouncyCastle, which the sandbox image does
 * not carry (module-info, "Minting and BouncyCastle").
 */
final class SandboxServerName {
    private static final Pattern SESSION_ID = Pattern.compile("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");

    private SandboxServerName() {
    }

    static String of(String sessionId) {
        if (!SESSION_ID.matcher(sessionId).matches()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT,
                    "session id must be a lower-case DNS label (1-63 of a-z, 0-9, '-')");
        }
        return "sandbox." + sessionId + ".openshell.internal";
    }
}
