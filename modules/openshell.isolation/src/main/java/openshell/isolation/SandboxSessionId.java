package openshell.isolation;

import java.math.BigInteger;
import java.security.SecureRandom;
import java.util.regex.Pattern;

/**
 * One launch of a sandbox. Fresh for every launch, so tokens, certificates and ledgers of an
 * earlier launch can never be replayed into a later one. 128 random bits in lower-case base32:
 * it is also a DNS label ({@code sandbox.<session>.openshell.internal}).
 *
 * @param value 26 characters of {@code [a-z2-7]}
 */
public record SandboxSessionId(String value) {
    /** Exact length of an id: 130 bits of base32, the top two bits zero. */
    public static final int LENGTH = 26;
    private static final Pattern FORMAT = Pattern.compile("[a-z2-7]{" + LENGTH + "}");
    private static final char[] ALPHABET = "abcdefghijklmnopqrstuvwxyz234567".toCharArray();
    private static final SecureRandom RANDOM = new SecureRandom();

    /** Validates the format. */
    public SandboxSessionId {
        BackendException.require(value, "session id");
        if (!FORMAT.matcher(value).matches()) {
            throw BackendException.invalid("session id must be " + LENGTH + " characters of [a-z2-7]");
        }
    }

    /** @return a new id of 128 bits from a strong random source */
    public static SandboxSessionId fresh() {
        byte[] bits = new byte[16];
        RANDOM.nextBytes(bits);
        // 26 base32 digits hold 130 bits: the 128 random ones, below two zero bits.
        BigInteger value = new BigInteger(1, bits);
        StringBuilder out = new StringBuilder(LENGTH);
        for (int digit = LENGTH - 1; digit >= 0; digit--) {
            out.append(ALPHABET[value.shiftRight(5 * digit).intValue() & 31]);
        }
        return new SandboxSessionId(out.toString());
    }

    @Override
    public String toString() {
        return value;
    }
}
