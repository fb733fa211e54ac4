package openshell.supervisor;

import static openshell.supervisor.Fixture.WAIT;
import static openshell.supervisor.Fixture.who;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import openshell.isolation.DenyReason;
import openshell.isolation.IdentityResolution;
import openshell.isolation.dns.DnsMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The DNS plane. The workload side is the {@link TestMediationSource} test double; the host
 * resolver is a table (trusted configuration), so answers do not depend on this machine's DNS.
 */
@Timeout(120)
class DnsPlaneTest {
    private static final String POLICY = """
            version: 1
            network_policies:
              web:
                endpoints:
                  - host: "*.example.test"
                    port: 443
                    protocol: tcp
                  - host: db.corp.test
                    port: 5432
                    protocol: tcp
                  - host: "*.corp.test"
                    port: 5432
                    protocol: tcp
                binaries:
                  - path: /usr/bin/curl
            """;

    private static HostResolver table() {
        return name -> switch (name) {
            case "www.example.test" -> List.of(InetAddress.ofLiteral("93.184.216.34"), InetAddress.ofLiteral("127.0.0.1"),
                    InetAddress.ofLiteral("169.254.169.254"), InetAddress.ofLiteral("2606:2800:220:1::1"));
            case "db.corp.test", "cache.corp.test" -> List.of(InetAddress.ofLiteral("10.20.30.40"));
            default -> throw new UnknownHostException(name);
        };
    }

    /** @return rcode and A/AAAA addresses of a response */
    static Object[] decode(byte[] r) throws Exception {
        int rcode = r[3] & 0xf;
        int an = DnsMessage.u16(r, 6);
        int p = 12;
        while (r[p] != 0) {
            p += (r[p] & 0xff) + 1;
        }
        p += 5;
        List<InetAddress> out = new java.util.ArrayList<>();
        for (int i = 0; i < an; i++) {
            int len = DnsMessage.u16(r, p + 10);
            byte[] data = java.util.Arrays.copyOfRange(r, p + 12, p + 12 + len);
            out.add(InetAddress.getByAddress(data));
            p += 12 + len;
        }
        return new Object[] {rcode, out};
    }

    @Test
    void allowedNameIsAnsweredFilteredAndPinned() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            Object[] r = decode(f.resolve(who("/usr/bin/curl"), "WWW.Example.test"));
            assertEquals(DnsMessage.RCODE_NOERROR, r[0]);
            assertEquals(List.of(InetAddress.ofLiteral("93.184.216.34")), r[1], "loopback, metadata and the AAAA are dropped");
            InetAddress pub = InetAddress.ofLiteral("93.184.216.34");
            assertEquals("www.example.test", f.mediation.pins().namesFor(pub).getFirst().name());
            assertTrue(f.mediation.pins().namesFor(InetAddress.ofLiteral("127.0.0.1")).isEmpty());
            assertTrue(f.lastAudit("dns").contains("of a refused class dropped"), f.lastAudit("dns"));
        }
    }

    @Test
    void privateAnswerOnlyForTheExactlyDeclaredHost() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            assertEquals(List.of(InetAddress.ofLiteral("10.20.30.40")), decode(f.resolve(who("/usr/bin/curl"), "db.corp.test"))[1]);
            assertEquals(List.of(), decode(f.resolve(who("/usr/bin/curl"), "cache.corp.test"))[1]);
        }
    }

    @Test
    void otherNamesOtherBinariesAndUnknownCallersGetNoAnswer() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            assertEquals(DnsMessage.RCODE_NXDOMAIN, decode(f.resolve(who("/usr/bin/curl"), "evil.test"))[0]);
            assertEquals(DnsMessage.RCODE_NXDOMAIN, decode(f.resolve(who("/usr/bin/python3"), "www.example.test"))[0]);
            assertEquals(DnsMessage.RCODE_REFUSED,
                    decode(f.resolve(new IdentityResolution.Unresolved("gone"), "www.example.test"))[0]);
            assertTrue(f.mediation.pins().namesFor(InetAddress.ofLiteral("93.184.216.34")).isEmpty(), "nothing pinned");
        }
    }

    @Test
    void otherRecordTypesOfAnAllowedNameAreEmpty() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            TestMediationSource.Query q = f.source.query(who("/usr/bin/curl"), DnsMessage.query(7, "www.example.test", 16));
            Object[] r = decode(q.response.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertEquals(DnsMessage.RCODE_NOERROR, r[0]);
            assertEquals(List.of(), r[1]);
        }
    }

    @Test
    void malformedQueriesGetFormerrOrAreRefused() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            TestMediationSource.Query shortOne = f.source.query(who("/usr/bin/curl"), new byte[5]);
            assertEquals(DenyReason.POLICY, shortOne.refused.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            byte[] pointer = DnsMessage.query(9, "a.example.test", 1);
            pointer[12] = (byte) 0xc0;
            byte[] r = f.source.query(who("/usr/bin/curl"), pointer).response.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(DnsMessage.RCODE_FORMERR, r[3] & 0xf);
            assertEquals(9, DnsMessage.u16(r, 0));
            byte[] query = DnsMessage.query(10, "www.example.test", 1);
            byte[] atBound = java.util.Arrays.copyOf(query, DnsMessage.MAX_QUERY_BYTES);
            byte[] ok = f.source.query(who("/usr/bin/curl"), atBound).response.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(DnsMessage.RCODE_NOERROR, ok[3] & 0xf, "a query of exactly the bound is answered");
            byte[] overBound = java.util.Arrays.copyOf(query, DnsMessage.MAX_QUERY_BYTES + 1);
            byte[] tooBig = f.source.query(who("/usr/bin/curl"), overBound).response.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(DnsMessage.RCODE_FORMERR, tooBig[3] & 0xf);
        }
    }

    @Test
    void transientFailuresAreRetriedUpToTheBound() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        HostResolver flaky = name -> {
            if (calls.incrementAndGet() < DnsPlane.RESOLVE_ATTEMPTS) {
                throw new IOException("temporary failure");
            }
            return List.of(InetAddress.ofLiteral("93.184.216.34"));
        };
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(flaky))) {
            assertEquals(DnsMessage.RCODE_NOERROR, decode(f.resolve(who("/usr/bin/curl"), "www.example.test"))[0]);
            assertEquals(DnsPlane.RESOLVE_ATTEMPTS, calls.get());
        }
        AtomicInteger failures = new AtomicInteger();
        HostResolver down = name -> {
            failures.incrementAndGet();
            throw new IOException("temporary failure");
        };
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(down))) {
            assertEquals(DnsMessage.RCODE_SERVFAIL, decode(f.resolve(who("/usr/bin/curl"), "www.example.test"))[0]);
            assertEquals(DnsPlane.RESOLVE_ATTEMPTS, failures.get(), "no attempt beyond the bound");
        }
    }

    @Test
    void atMaxInFlightTheNextQueryIsRefused() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch entered = new CountDownLatch(1);
        AtomicInteger calls = new AtomicInteger();
        HostResolver stuck = name -> {
            calls.incrementAndGet();
            entered.countDown();
            try {
                release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return List.of(InetAddress.ofLiteral("93.184.216.34"));
        };
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(stuck))) {
            List<TestMediationSource.Query> held = new java.util.ArrayList<>();
            for (int i = 0; i < DnsPlane.MAX_IN_FLIGHT; i++) {
                held.add(f.source.query(who("/usr/bin/curl"), DnsMessage.query(i, "www.example.test", 1)));
            }
            assertTrue(entered.await(WAIT.toSeconds(), TimeUnit.SECONDS));
            // The accept loop takes queries in order: once the last held one is resolving, the next is over the bound.
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (calls.get() < DnsPlane.MAX_IN_FLIGHT && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(DnsPlane.MAX_IN_FLIGHT, calls.get());
            TestMediationSource.Query over = f.source.query(who("/usr/bin/curl"), DnsMessage.query(999, "www.example.test", 1));
            assertEquals(DenyReason.EXHAUSTED, over.refused.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            release.countDown();
            for (TestMediationSource.Query q : held) {
                assertEquals(DnsMessage.RCODE_NOERROR, q.response.get(WAIT.toSeconds(), TimeUnit.SECONDS)[3] & 0xf);
            }
        }
    }

    /** A query that records whether it was answered on a virtual thread. */
    private static final class ThreadNoting extends TestMediationSource.Query {
        final java.util.concurrent.CompletableFuture<Boolean> virtual = new java.util.concurrent.CompletableFuture<>();

        ThreadNoting(int id, String name) {
            super(who("/usr/bin/curl"), DnsMessage.query(id, name, 1));
        }

        @Override
        public void answer(byte[] r) {
            virtual.complete(Thread.currentThread().isVirtual());
            super.answer(r);
        }
    }

    /**
     * Only a query that needs the host's resolver leaves the thread it arrived on (the lane's
     * reader or the accept loop): a name resolved within RESOLVED_TTL and a denied name are
     * answered there, one hand-off fewer; the first query of a name goes to a virtual thread.
     */
    @Test
    void onlyAQueryThatMustResolveLeavesItsArrivalThread() throws Exception {
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(table()))) {
            ThreadNoting first = f.source.offer(new ThreadNoting(1, "www.example.test"));
            assertEquals(true, first.virtual.get(WAIT.toSeconds(), TimeUnit.SECONDS), "resolved on a virtual thread");
            ThreadNoting again = f.source.offer(new ThreadNoting(2, "www.example.test"));
            assertEquals(false, again.virtual.get(WAIT.toSeconds(), TimeUnit.SECONDS), "fresh: answered where it arrived");
            assertEquals(List.of("93.184.216.34"), ((List<?>) decode(again.response.get(WAIT.toSeconds(),
                    TimeUnit.SECONDS))[1]).stream().map(a -> ((InetAddress) a).getHostAddress()).toList());
            ThreadNoting denied = f.source.offer(new ThreadNoting(3, "www.elsewhere.test"));
            assertEquals(false, denied.virtual.get(WAIT.toSeconds(), TimeUnit.SECONDS), "a denial resolves nothing");
            assertEquals(DnsMessage.RCODE_NXDOMAIN, denied.response.get(WAIT.toSeconds(), TimeUnit.SECONDS)[3] & 0xf);
        }
    }

    @Test
    void answersAreCappedAtMaxAnswers() throws Exception {
        List<InetAddress> many = new java.util.ArrayList<>();
        for (int i = 1; i <= DnsPlane.MAX_ANSWERS + 4; i++) {
            many.add(InetAddress.ofLiteral("93.184.216." + i));
        }
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(name -> many))) {
            @SuppressWarnings("unchecked")
            List<InetAddress> got = (List<InetAddress>) decode(f.resolve(who("/usr/bin/curl"), "www.example.test"))[1];
            assertEquals(many.subList(0, DnsPlane.MAX_ANSWERS), got);
            assertTrue(f.mediation.pins().namesFor(many.getLast()).isEmpty(), "an address not answered is not pinned");
        }
    }

    @Test
    void aNameAskedAgainWithinItsTimeIsNotResolvedAgain() throws Exception {
        AtomicInteger lookups = new AtomicInteger();
        MutableClock clock = new MutableClock();
        HostResolver counting = name -> {
            lookups.incrementAndGet();
            return table().resolve(name);
        };
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(counting).clock(clock))) {
            IdentityResolution curl = who("/usr/bin/curl");
            List<InetAddress> db = List.of(InetAddress.ofLiteral("10.20.30.40"));
            assertEquals(db, decode(f.resolve(curl, "db.corp.test"))[1]);
            clock.advance(DnsPlane.RESOLVED_TTL.minusMillis(1));
            assertEquals(db, decode(f.resolve(curl, "DB.corp.test"))[1]);
            assertEquals(1, lookups.get(), "asked again within its time: the kept resolution");
            clock.advance(java.time.Duration.ofMillis(1));
            assertEquals(db, decode(f.resolve(curl, "db.corp.test"))[1]);
            assertEquals(2, lookups.get(), "resolved again once its time is up");
            // A failure is never kept: each query asks the host again.
            assertEquals(DnsMessage.RCODE_NXDOMAIN, decode(f.resolve(curl, "gone.corp.test"))[0]);
            assertEquals(DnsMessage.RCODE_NXDOMAIN, decode(f.resolve(curl, "gone.corp.test"))[0]);
            assertEquals(4, lookups.get());
        }
    }

    @Test
    void theTableOfKeptResolutionsIsBounded() throws Exception {
        AtomicInteger lookups = new AtomicInteger();
        MutableClock clock = new MutableClock();
        HostResolver any = name -> {
            int n = lookups.incrementAndGet();
            return List.of(InetAddress.ofLiteral("10.9." + (n / 256 % 256) + "." + (n % 256)));
        };
        try (Fixture f = Fixture.start(POLICY, b -> b.resolver(any).clock(clock))) {
            IdentityResolution curl = who("/usr/bin/curl");
            for (int i = 0; i < DnsPlane.MAX_RESOLVED_NAMES; i++) {
                assertEquals(DnsMessage.RCODE_NOERROR, decode(f.resolve(curl, "n" + i + ".corp.test"))[0]);
            }
            assertEquals(DnsPlane.MAX_RESOLVED_NAMES, f.mediation.dnsPlane().resolvedNames());
            // One past the bound is answered, but not kept: asked again, it is resolved again.
            f.resolve(curl, "extra.corp.test");
            f.resolve(curl, "extra.corp.test");
            assertEquals(DnsPlane.MAX_RESOLVED_NAMES + 2, lookups.get());
            assertEquals(DnsPlane.MAX_RESOLVED_NAMES, f.mediation.dnsPlane().resolvedNames());
            // A kept name is still reused at the bound.
            f.resolve(curl, "n0.corp.test");
            assertEquals(DnsPlane.MAX_RESOLVED_NAMES + 2, lookups.get());
            // Once they have expired, a new name makes room by dropping them.
            clock.advance(DnsPlane.RESOLVED_TTL);
            f.resolve(curl, "later.corp.test");
            assertEquals(1, f.mediation.dnsPlane().resolvedNames());
        }
    }

    @Test
    void pinTableBounds() {
        MutableClock clock = new MutableClock();
        DnsPins pins = new DnsPins(clock);
        InetAddress shared = InetAddress.ofLiteral("93.184.216.34");
        for (int i = 0; i <= DnsPins.MAX_NAMES_PER_ADDRESS; i++) {
            pins.pin("n" + i + ".test", shared, false, DnsPlane.ANSWER_TTL);
        }
        assertEquals(DnsPins.MAX_NAMES_PER_ADDRESS, pins.namesFor(shared).size());
        assertEquals("n" + DnsPins.MAX_NAMES_PER_ADDRESS + ".test", pins.namesFor(shared).getFirst().name());
        for (int i = 0; i < DnsPins.MAX_PINS; i++) {
            pins.pin("h.test", InetAddress.ofLiteral("93.185." + (i / 256) + "." + (i % 256)), false, DnsPlane.ANSWER_TTL);
        }
        assertEquals(DnsPins.MAX_PINS, pins.size());
        assertTrue(pins.namesFor(shared).isEmpty(), "the oldest address is forgotten first");
        InetAddress last = InetAddress.ofLiteral("93.185.15.255");
        clock.advance(DnsPlane.ANSWER_TTL.plus(DnsPins.PIN_GRACE).minusSeconds(1));
        assertEquals(1, pins.namesFor(last).size(), "still pinned just before TTL + grace");
        clock.advance(java.time.Duration.ofSeconds(1));
        assertTrue(pins.namesFor(last).isEmpty(), "expired at TTL + grace");
    }

    /** A clock the test moves. */
    static final class MutableClock extends java.time.Clock {
        private java.time.Instant now = java.time.Instant.parse("2026-01-01T00:00:00Z");

        void advance(java.time.Duration d) {
            now = now.plus(d);
        }

        @Override
        public java.time.ZoneId getZone() {
            return java.time.ZoneOffset.UTC;
        }

        @Override
        public java.time.Clock withZone(java.time.ZoneId zone) {
            return this;
        }

        @Override
        public java.time.Instant instant() {
            return now;
        }
    }
}
