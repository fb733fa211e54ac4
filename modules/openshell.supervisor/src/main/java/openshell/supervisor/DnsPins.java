package openshell.supervisor;

import java.net.InetAddress;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The sandbox's DNS pin table: every address this supervisor answered, with the name it answered
 * for. A later dial to that address is decided on the name, and only an address found here was
 * resolved and validated by this supervisor. Bounded: the oldest address is forgotten first (a dial
 * to it is then decided on the bare address, which only IP-literal endpoints allow).
 */
final class DnsPins {
    /** Most (address, name) pins kept. */
    static final int MAX_PINS = 4096;
    /** Most names pinned to one address (shared CDN or alias addresses); the oldest is dropped. */
    static final int MAX_NAMES_PER_ADDRESS = 8;
    /** How long a pin outlives the answer's TTL, for clients that cache answers a little longer. */
    static final Duration PIN_GRACE = Duration.ofMinutes(5);

    /** A name this supervisor answered with the address; {@code aliased} when it came from an operator alias. */
    record Pin(String name, boolean aliased, Instant expires) {
    }

    private final Clock clock;
    private final LinkedHashMap<InetAddress, List<Pin>> byAddress = new LinkedHashMap<>();
    private int size;

    DnsPins(Clock clock) {
        this.clock = clock;
    }

    /**
     * @param name    canonical name
     * @param address an address answered for it
     * @param aliased whether the address is an operator alias
     * @param ttl     the TTL answered
     */
    synchronized void pin(String name, InetAddress address, boolean aliased, Duration ttl) {
        Instant expires = clock.instant().plus(ttl).plus(PIN_GRACE);
        List<Pin> pins = byAddress.remove(address);
        if (pins == null) {
            pins = new ArrayList<>(2);
        }
        for (Iterator<Pin> it = pins.iterator(); it.hasNext(); ) {
            if (it.next().name().equals(name)) {
                it.remove();
                size--;
            }
        }
        pins.addFirst(new Pin(name, aliased, expires));
        size++;
        if (pins.size() > MAX_NAMES_PER_ADDRESS) {
            pins.removeLast();
            size--;
        }
        byAddress.put(address, pins);
        while (size > MAX_PINS) {
            Iterator<Map.Entry<InetAddress, List<Pin>>> oldest = byAddress.entrySet().iterator();
            Map.Entry<InetAddress, List<Pin>> e = oldest.next();
            e.getValue().removeLast();
            size--;
            if (e.getValue().isEmpty()) {
                oldest.remove();
            }
        }
    }

    /** @return the live names pinned to the address, most recent first */
    synchronized List<Pin> namesFor(InetAddress address) {
        List<Pin> pins = byAddress.get(address);
        if (pins == null) {
            return List.of();
        }
        Instant now = clock.instant();
        int before = pins.size();
        pins.removeIf(p -> !p.expires().isAfter(now));
        size -= before - pins.size();
        if (pins.isEmpty()) {
            byAddress.remove(address);
            return List.of();
        }
        return List.copyOf(pins);
    }

    synchronized int size() {
        return size;
    }
}
