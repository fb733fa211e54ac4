package openshell.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet6Address;
import java.net.InetAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class AddressClassTest {
    @ParameterizedTest
    @CsvSource({
            "8.8.8.8, PUBLIC",
            "93.184.216.34, PUBLIC",
            "2606:4700::1111, PUBLIC",
            "10.0.0.1, PRIVATE",
            "172.16.0.1, PRIVATE",
            "172.31.255.255, PRIVATE",
            "172.32.0.1, PUBLIC",
            "192.168.1.1, PRIVATE",
            "100.64.0.1, PRIVATE",
            "100.127.255.255, PRIVATE",
            "100.128.0.1, PUBLIC",
            "198.18.0.1, PRIVATE",
            "fd12::1, PRIVATE",
            "fc00::1, PRIVATE",
            "fec0::1, PRIVATE",
            "64:ff9b:1::1, PRIVATE",
            "127.0.0.1, LOOPBACK",
            "127.255.255.254, LOOPBACK",
            "::1, LOOPBACK",
            "169.254.1.1, LINK_LOCAL",
            "fe80::1, LINK_LOCAL",
            "febf::1, LINK_LOCAL",
            "0.0.0.0, UNSPECIFIED",
            "0.1.2.3, UNSPECIFIED",
            "::, UNSPECIFIED",
            "169.254.169.254, METADATA",
            "169.254.170.2, METADATA",
            "100.100.100.200, METADATA",
            "168.63.129.16, METADATA",
            "fd00:ec2::254, METADATA",
            "224.0.0.1, MULTICAST",
            "ff02::1, MULTICAST",
            "240.0.0.1, RESERVED",
            "255.255.255.255, RESERVED",
            "2001:db8::1, RESERVED",
            "2001:0::1, RESERVED",
            "::ffff:127.0.0.1, LOOPBACK",
            "::ffff:10.0.0.1, PRIVATE",
            "::127.0.0.1, LOOPBACK",
            "::169.254.169.254, METADATA",
            "64:ff9b::7f00:1, LOOPBACK",
            "64:ff9b::a9fe:a9fe, METADATA",
            "64:ff9b::808:808, PUBLIC",
            "2002:7f00:1::, LOOPBACK",
            "2002:0a00:1::, PRIVATE",
            "2002:0808:0808::, PUBLIC",
    })
    void classifies(String literal, AddressClass expected) {
        assertEquals(expected, AddressClass.of(InetAddress.ofLiteral(literal)), literal);
    }

    @Test
    void mappedAddressesBuiltAsInet6AreClassifiedByTheEmbeddedAddress() throws Exception {
        byte[] mapped = new byte[16];
        mapped[10] = (byte) 0xff;
        mapped[11] = (byte) 0xff;
        mapped[12] = (byte) 169;
        mapped[13] = (byte) 254;
        mapped[14] = (byte) 169;
        mapped[15] = (byte) 254;
        InetAddress a = Inet6Address.getByAddress(null, mapped, -1);
        assertEquals(AddressClass.METADATA, AddressClass.of(a));
    }

    @Test
    void permissions() {
        assertTrue(AddressClass.PUBLIC.permitted(false));
        assertTrue(AddressClass.PRIVATE.permitted(true));
        assertFalse(AddressClass.PRIVATE.permitted(false));
        for (AddressClass c : new AddressClass[] {AddressClass.LOOPBACK, AddressClass.LINK_LOCAL, AddressClass.UNSPECIFIED,
                AddressClass.METADATA, AddressClass.MULTICAST, AddressClass.RESERVED}) {
            assertFalse(c.permitted(true), c.name());
            assertFalse(c.permitted(false), c.name());
        }
        assertFalse(AddressClass.permits(InetAddress.ofLiteral("127.0.0.1"), true));
        assertTrue(AddressClass.permits(InetAddress.ofLiteral("10.1.1.1"), true));
    }
}
