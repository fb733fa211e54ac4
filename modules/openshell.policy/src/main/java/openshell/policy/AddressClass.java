package openshell.policy;

import java.net.InetAddress;
import java.util.Objects;

/**
 * The class of a destination address, which decides whether the supervisor may dial it at all:
 * loopback, link-local, unspecified, cloud-metadata, multicast and reserved addresses are refused
 * always; private ranges only unless the exact host (or address) is declared by an endpoint; public
 * addresses follow the policy. IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64
 * {@code 64:ff9b::/96}, 6to4 {@code 2002::/16}) are classified by the embedded address, so no
 * spelling of a refused address slips through.
 */
public enum AddressClass {
    /** Globally routable: allowed when the policy allows the destination. */
    PUBLIC,
    /** RFC 1918, CGNAT 100.64/10, benchmarking 198.18/15, IPv6 unique-local and site-local: only if declared exactly. */
    PRIVATE,
    /** 127/8, ::1: refused always. */
    LOOPBACK,
    /** 169.254/16, fe80::/10: refused always. */
    LINK_LOCAL,
    /** 0/8, ::: refused always. */
    UNSPECIFIED,
    /** Cloud instance-metadata services (169.254.169.254, 169.254.170.2, 100.100.100.200, 168.63.129.16, fd00:ec2::254): refused always. */
    METADATA,
    /** 224/4, ff00::/8: refused always (not a TCP destination). */
    MULTICAST,
    /** 240/4 and broadcast, Teredo 2001::/32, documentation 2001:db8::/32: refused always. */
    RESERVED;

    /**
     * @param address any address
     * @return its class
     */
    public static AddressClass of(InetAddress address) {
        Objects.requireNonNull(address, "address");
        byte[] b = address.getAddress();
        if (b.length == 4) {
            return ofV4(b, 0);
        }
        return ofV6(b);
    }

    /**
     * @param declaredExactly whether an allowing endpoint names this exact host or address
     * @return whether an address of this class may be dialled
     */
    public boolean permitted(boolean declaredExactly) {
        return this == PUBLIC || (this == PRIVATE && declaredExactly);
    }

    /**
     * @param address         the address to dial
     * @param declaredExactly whether an allowing endpoint names this exact host or address
     * @return whether the supervisor may dial it
     */
    public static boolean permits(InetAddress address, boolean declaredExactly) {
        return of(address).permitted(declaredExactly);
    }

    private static int u(byte b) {
        return b & 0xff;
    }

    private static AddressClass ofV4(byte[] b, int o) {
        int a0 = u(b[o]);
        int a1 = u(b[o + 1]);
        int a2 = u(b[o + 2]);
        int a3 = u(b[o + 3]);
        if ((a0 == 169 && a1 == 254 && a2 == 169 && a3 == 254) || (a0 == 169 && a1 == 254 && a2 == 170 && a3 == 2)
                || (a0 == 100 && a1 == 100 && a2 == 100 && a3 == 200) || (a0 == 168 && a1 == 63 && a2 == 129 && a3 == 16)) {
            return METADATA;
        }
        if (a0 == 0) {
            return UNSPECIFIED;
        }
        if (a0 == 127) {
            return LOOPBACK;
        }
        if (a0 == 169 && a1 == 254) {
            return LINK_LOCAL;
        }
        if (a0 >= 224 && a0 <= 239) {
            return MULTICAST;
        }
        if (a0 >= 240) {
            return RESERVED;
        }
        if (a0 == 10 || (a0 == 172 && a1 >= 16 && a1 <= 31) || (a0 == 192 && a1 == 168)
                || (a0 == 100 && a1 >= 64 && a1 <= 127) || (a0 == 198 && (a1 == 18 || a1 == 19))) {
            return PRIVATE;
        }
        return PUBLIC;
    }

    private static AddressClass ofV6(byte[] b) {
        boolean first10Zero = true;
        for (int i = 0; i < 10; i++) {
            first10Zero &= b[i] == 0;
        }
        if (first10Zero && u(b[10]) == 0xff && u(b[11]) == 0xff) {
            return ofV4(b, 12);
        }
        if (first10Zero && b[10] == 0 && b[11] == 0) {
            boolean upperZero = b[12] == 0 && b[13] == 0 && b[14] == 0;
            if (upperZero && b[15] == 0) {
                return UNSPECIFIED;
            }
            if (upperZero && b[15] == 1) {
                return LOOPBACK;
            }
            return ofV4(b, 12);
        }
        int w0 = (u(b[0]) << 8) | u(b[1]);
        int w1 = (u(b[2]) << 8) | u(b[3]);
        if (w0 == 0x0064 && w1 == 0xff9b) {
            boolean wkp = true;
            for (int i = 4; i < 12; i++) {
                wkp &= b[i] == 0;
            }
            return wkp ? ofV4(b, 12) : PRIVATE;
        }
        if (w0 == 0x2002) {
            return ofV4(b, 2);
        }
        if (w0 == 0x2001 && (w1 == 0x0000 || w1 == 0x0db8)) {
            return RESERVED;
        }
        if (w0 == 0xfd00 && w1 == 0x0ec2 && isHostPart254(b)) {
            return METADATA;
        }
        if ((w0 & 0xff00) == 0xff00) {
            return MULTICAST;
        }
        if ((w0 & 0xffc0) == 0xfe80) {
            return LINK_LOCAL;
        }
        if ((w0 & 0xfe00) == 0xfc00 || (w0 & 0xffc0) == 0xfec0) {
            return PRIVATE;
        }
        return PUBLIC;
    }

    /** fd00:ec2::254: every byte after the first four is zero but the last two, 0x0254. */
    private static boolean isHostPart254(byte[] b) {
        for (int i = 4; i < 14; i++) {
            if (b[i] != 0) {
                return false;
            }
        }
        return u(b[14]) == 0x02 && u(b[15]) == 0x54;
    }
}
