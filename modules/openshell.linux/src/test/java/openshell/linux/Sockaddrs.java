package openshell.linux;

import com.sun.jna.Memory;

/** Builds {@code struct sockaddr_in} for tests. */
final class Sockaddrs {
    private Sockaddrs() {
    }

    static Memory inet4(byte[] address, int port) {
        Memory sockaddr = new Memory(16);
        sockaddr.clear();
        sockaddr.setShort(0, (short) WorkloadFilter.AF_INET);
        sockaddr.setByte(2, (byte) (port >> 8));
        sockaddr.setByte(3, (byte) port);
        sockaddr.write(4, address, 0, 4);
        return sockaddr;
    }
}
