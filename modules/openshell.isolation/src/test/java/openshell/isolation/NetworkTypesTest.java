package openshell.isolation;

import static openshell.isolation.Rejections.invalid;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

import org.junit.jupiter.api.Test;

/** Loopback targets, destinations and binary identities: what crosses the boundary and who asked. */
class NetworkTypesTest {
    private static final String HEX = "0123456789abcdef".repeat(4);

    @Test
    void loopbackTargetAcceptsOnlyLoopback() throws UnknownHostException {
        for (String ok : List.of("127.0.0.1", "127.1.2.3", "127.255.255.254", "::1")) {
            assertEquals(80, new LoopbackTarget(InetAddress.getByName(ok), 80).port());
        }
        for (String bad : List.of("10.0.0.1", "192.0.2.1", "0.0.0.0", "::", "169.254.169.254", "2001:db8::1", "fe80::1")) {
            InetAddress address = InetAddress.getByName(bad);
            assertTrue(invalid(() -> new LoopbackTarget(address, 80)).getMessage().contains("loopback only"));
        }
        invalid(() -> new LoopbackTarget(null, 80));
        assertEquals(InetAddress.getLoopbackAddress(), LoopbackTarget.of(8080).address());
    }

    @Test
    void portsAreBoundedAt1And65535() {
        assertEquals(1, LoopbackTarget.of(1).port());
        assertEquals(65535, LoopbackTarget.of(65535).port());
        invalid(() -> LoopbackTarget.of(0));
        invalid(() -> LoopbackTarget.of(65536));
        InetAddress any = InetAddress.getLoopbackAddress();
        assertEquals(65535, new TcpDestination(any, 65535).port());
        invalid(() -> new TcpDestination(any, 0));
        invalid(() -> new TcpDestination(any, 65536));
        invalid(() -> new TcpDestination(null, 443));
    }

    @Test
    void socketIdentityIsAPositiveInode() {
        assertEquals(1, new SocketIdentity(1).inode());
        invalid(() -> new SocketIdentity(0));
        invalid(() -> new SocketIdentity(-1));
    }

    @Test
    void aMissingDigestIsEmptyNeverAPlaceholder() {
        Executable unknown = Executable.of("/usr/bin/curl");
        assertTrue(unknown.sha256().isEmpty());
        assertEquals("/usr/bin/curl", unknown.toString());
        assertNotEquals(unknown, Executable.of("/usr/bin/curl", "0".repeat(64)), "a zero digest is a value, not 'unknown'");
    }

    @Test
    void aDigestIsExactly64HexDigitsFoldedToLowerCase() {
        assertEquals(HEX, Executable.of("/bin/x", HEX).sha256().orElseThrow());
        assertEquals(HEX, Executable.of("/bin/x", HEX.toUpperCase(Locale.ROOT)).sha256().orElseThrow());
        assertEquals(Executable.of("/bin/x", HEX), Executable.of("/bin/x", HEX.toUpperCase(Locale.ROOT)));
        for (String bad : List.of("", HEX.substring(1), HEX + "a", HEX.substring(1) + "g", HEX.substring(2) + "0x",
                " " + HEX.substring(1), "sha256:" + HEX)) {
            invalid(() -> Executable.of("/bin/x", bad));
        }
        invalid(() -> Executable.of("/bin/x", null));
    }

    @Test
    void executablePathIsAbsoluteAndAtMostPathMax() {
        String longest = "/" + "a".repeat(Executable.MAX_PATH - 1);
        assertEquals(Executable.MAX_PATH, Executable.of(longest).path().length());
        invalid(() -> Executable.of(longest + "a"));
        invalid(() -> Executable.of("bin/x"));
        invalid(() -> Executable.of(""));
        invalid(() -> Executable.of("/bin/x\0y"));
        invalid(() -> Executable.of(null));
    }

    @Test
    void binaryIdentityBoundsAncestorsAndCmdlineAndCopiesThem() {
        Executable exe = Executable.of("/usr/bin/python3", HEX);
        List<Executable> ancestors = new ArrayList<>(Collections.nCopies(BinaryIdentity.MAX_ANCESTORS, Executable.of("/bin/sh")));
        List<String> cmdline = new ArrayList<>(Collections.nCopies(BinaryIdentity.MAX_CMDLINE, "arg"));
        BinaryIdentity atBound = new BinaryIdentity(exe, ancestors, cmdline);
        assertEquals(BinaryIdentity.MAX_ANCESTORS, atBound.ancestors().size());
        assertEquals(BinaryIdentity.MAX_CMDLINE, atBound.diagnosticCmdline().size());
        ancestors.add(Executable.of("/sbin/init"));
        cmdline.add("more");
        assertEquals(BinaryIdentity.MAX_ANCESTORS, atBound.ancestors().size(), "the identity keeps its own copy");
        invalid(() -> new BinaryIdentity(exe, ancestors, List.of()));
        invalid(() -> new BinaryIdentity(exe, List.of(), cmdline));
        invalid(() -> new BinaryIdentity(null, List.of(), List.of()));
        invalid(() -> new BinaryIdentity(exe, null, List.of()));
        invalid(() -> new BinaryIdentity(exe, List.of(), null));
        assertEquals("/usr/bin/python3", BinaryIdentity.of(exe).path());
        assertEquals(HEX, BinaryIdentity.of(exe).executable().sha256().orElseThrow());
    }

    @Test
    void anUnresolvedIdentityNeedsAReason() {
        assertEquals("process exited", new IdentityResolution.Unresolved("process exited").reason());
        invalid(() -> new IdentityResolution.Unresolved(" "));
        invalid(() -> new IdentityResolution.Unresolved(null));
        invalid(() -> new IdentityResolution.Resolved(null));
    }
}
