package openshell.isolation.conformance;

import static openshell.isolation.conformance.Workbench.await;
import static openshell.isolation.conformance.Workbench.expect;
import static openshell.isolation.conformance.Workbench.finish;
import static openshell.isolation.conformance.Workbench.heldOpen;
import static openshell.isolation.conformance.Workbench.required;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

import openshell.isolation.BackendException.Kind;
import openshell.isolation.BinaryIdentity;
import openshell.isolation.ByteChannel;
import openshell.isolation.DenyReason;
import openshell.isolation.ExecSession;
import openshell.isolation.ExitStatus;
import openshell.isolation.Executable;
import openshell.isolation.IdentityResolution;
import openshell.isolation.PendingDnsQuery;
import openshell.isolation.PendingTcpOpen;
import openshell.isolation.TcpDestination;
import openshell.isolation.dns.DnsMessage;

/** Pending opens: what they carry, one-shot decisions, and identities that must not be faked. */
final class MediationChecks {
    private MediationChecks() {
    }

    static List<Check> all() {
        return List.of(
                new Check("mediation.resolved-open-one-shot", MediationChecks::resolvedOpenOneShot),
                new Check("mediation.unresolved-open-only-denied", MediationChecks::unresolvedOnlyDenied),
                new Check("mediation.dns-query-one-shot", MediationChecks::dnsQueryOneShot),
                new Check("identity.missing-digest-empty", MediationChecks::missingDigestEmpty),
                new Check("identity.unreadable-binary-digest-empty", MediationChecks::unreadableBinaryDigestEmpty));
    }

    private static void resolvedOpenOneShot(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> connect = required(bench.target().connectProbe(destination), "connect probe", "mediation");
            Workbench.Started started = bench.startIdle();

            ExecSession denied = bench.exec(started.running(), connect);
            PendingTcpOpen open = heldOpen(started.source(), denied, destination, listener);
            assertEquals(destination, open.destination(), "the pending open must carry the destination as asked");
            BinaryIdentity identity = assertInstanceOf(IdentityResolution.Resolved.class, open.identity(),
                    "an ordinary program's identity must resolve").identity();
            assertTrue(identity.path().startsWith("/"));
            assertTrue(open.socket().inode() > 0);
            open.deny(DenyReason.POLICY);
            expect(Kind.INVALID, () -> open.deny(DenyReason.POLICY), "a second decision");
            expect(Kind.INVALID, () -> bench.adopt(open.allow()), "allowing a denied open");
            assertNotEquals(new ExitStatus.Exited(0), finish(denied, "the denied connect probe"),
                    "a denied connect() must fail in the workload");

            ExecSession allowed = bench.exec(started.running(), connect);
            PendingTcpOpen second = heldOpen(started.source(), allowed, destination, listener);
            try (ByteChannel _ = second.allow()) {
                expect(Kind.INVALID, () -> second.deny(DenyReason.POLICY), "denying an allowed open");
                assertEquals(new ExitStatus.Exited(0), finish(allowed, "the allowed connect probe"),
                        "an allowed connect() must succeed in the workload");
            }
            assertEquals(0, listener.accepted(), "the kit dialed nothing, so nothing may have reached the destination");
        }
    }

    private static void unresolvedOnlyDenied(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> probe = required(bench.target().unresolvedIdentityProbe(destination),
                    "unresolved-identity probe", "delivery of an unresolved identity");
            Workbench.Started started = bench.startIdle();
            ExecSession session = bench.exec(started.running(), probe);
            PendingTcpOpen open = heldOpen(started.source(), session, destination, listener);
            IdentityResolution.Unresolved unresolved = assertInstanceOf(IdentityResolution.Unresolved.class, open.identity(),
                    "the probe's identity must be delivered as unresolved, not guessed");
            assertFalse(unresolved.reason().isBlank());
            expect(Kind.DENIED, () -> bench.adopt(open.allow()), "allowing an open whose identity is unresolved");
            expect(Kind.INVALID, () -> open.deny(DenyReason.IDENTITY_UNRESOLVED), "deciding again after the refused allow");
            assertNotEquals(new ExitStatus.Exited(0), finish(session, "the unresolved probe"),
                    "an unresolved identity must end in a failed connect()");
            assertEquals(0, listener.accepted());
        }
    }

    private static void dnsQueryOneShot(Workbench bench) {
        String name = "conformance-probe.invalid";
        List<String> probe = required(bench.target().dnsProbe(name), "DNS probe", "that DNS queries are mediated");
        Workbench.Started started = bench.startIdle();
        ExecSession session = bench.exec(started.running(), probe);
        long deadline = System.nanoTime() + IsolationConformance.WAIT.toNanos();
        Optional<PendingDnsQuery> pending = Optional.empty();
        while (pending.isEmpty() && System.nanoTime() < deadline && session.process().awaitExit(Duration.ZERO).isEmpty()) {
            pending = started.source().acceptDns(IsolationConformance.POLL);
        }
        PendingDnsQuery query = pending.orElseGet(() -> fail("no DNS query reached the mediation source ("
                + session.process().awaitExit(Duration.ZERO).map(s -> "the probe ended with " + s).orElse("the probe still runs") + ")"));
        byte[] message = query.query();
        assertEquals(name, question(message).name(), "the pending query must carry the workload's question");
        expect(Kind.INVALID, () -> query.answer(new byte[PendingDnsQuery.MAX_MESSAGE_BYTES + 1]), "an oversized answer");
        // The refused answer decided nothing: a valid one still goes through, once.
        query.answer(DnsMessage.response(question(message), DnsMessage.RCODE_NXDOMAIN));
        expect(Kind.INVALID, () -> query.answer(DnsMessage.response(question(message), DnsMessage.RCODE_NXDOMAIN)), "a second answer");
        expect(Kind.INVALID, () -> query.refuse(DenyReason.POLICY), "refusing an answered query");
        assertEquals(new ExitStatus.Exited(0), finish(session, "the DNS probe"), "the answer must reach the workload");
    }

    /** The query's only question, or the check fails saying why it is not a well-formed query. */
    private static DnsMessage.Question question(byte[] message) {
        try {
            return DnsMessage.parse(message);
        } catch (DnsMessage.Malformed e) {
            return fail("the pending query is not a well-formed DNS query: " + e.getMessage());
        }
    }

    private static void missingDigestEmpty(Workbench bench) {
        Executable unknown = Executable.of("/usr/bin/agent");
        assertTrue(unknown.sha256().isEmpty(), "a digest that was not computed must be absent");
        assertTrue(BinaryIdentity.of(unknown).executable().sha256().isEmpty());
        String hex = "0123456789abcdef".repeat(4);
        assertEquals(hex, Executable.of("/usr/bin/agent", hex.toUpperCase(java.util.Locale.ROOT)).sha256().orElseThrow());
        for (String bad : List.of("", hex.substring(1), hex + "0", hex.substring(1) + "g", " " + hex.substring(1))) {
            expect(Kind.INVALID, () -> Executable.of("/usr/bin/agent", bad), "a digest of '" + bad + "'");
        }
    }

    private static void unreadableBinaryDigestEmpty(Workbench bench) {
        try (HostListener listener = HostListener.open()) {
            TcpDestination destination = listener.destination();
            List<String> probe = required(bench.target().unreadableBinaryProbe(destination),
                    "unreadable-binary probe", "that a digest that cannot be computed is absent");
            Workbench.Started started = bench.startIdle();
            ExecSession session = bench.exec(started.running(), probe);
            PendingTcpOpen open = heldOpen(started.source(), session, destination, listener);
            BinaryIdentity identity = assertInstanceOf(IdentityResolution.Resolved.class, open.identity(),
                    "an unreadable binary still has a path").identity();
            assertTrue(identity.executable().sha256().isEmpty(),
                    "an unreadable binary's digest must be absent, not " + identity.executable().sha256());
            open.deny(DenyReason.POLICY);
            finish(session, "the unreadable-binary probe");
        }
    }
}
