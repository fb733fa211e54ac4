package openshell.protocol;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import openshell.protocol.wire.ConfirmRequest;
import openshell.protocol.wire.DnsAnswer;
import openshell.protocol.wire.DnsQuery;
import openshell.protocol.wire.RelayDecision;
import openshell.protocol.wire.RelayDown;
import openshell.protocol.wire.RelayUp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A workload that stops reading must not freeze its link: with one relay's runtime side
 * blocked (the handler never returns, as when a write to the workload's socket blocks) and its
 * supervisor side still trying to send, a control call and a DNS query on the same link still
 * complete. Without message credits the sender filled Helidon's per-stream frame queue and
 * blocked the connection's only reader.
 */
class StalledRelayTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    @ParameterizedTest
    @EnumSource(Launch.Kind.class)
    void aStalledRelayFreezesNeitherControlNorDns(Launch.Kind kind) throws Exception {
        try (Launch launch = new Launch(kind, Initiator.SUPERVISOR); SupervisorLink link = launch.attached()) {
            StreamProbe<RelayDown> down = new StreamProbe<>();
            CreditedStream<RelayDown, RelayUp> relay = Launch.relay(link, down);
            relay.send(RelayUp.newBuilder().setDecision(RelayDecision.newBuilder().setConnectionId("stall").setAllow(true))
                    .build());
            AtomicLong sent = new AtomicLong();
            ByteString chunk = ByteString.copyFrom(new byte[CreditedStream.MAX_CHUNK_BYTES]);
            Thread sender = Thread.ofVirtual().start(() -> {
                try {
                    while (true) {
                        relay.send(RelayUp.newBuilder().setData(chunk).build());
                        sent.incrementAndGet();
                    }
                } catch (ProtocolException e) {
                    // the test ends the stream
                }
            });
            try {
                assertTrue(launch.service.stallEntered.await(WAIT.toMillis(), TimeUnit.MILLISECONDS), "the relay stalled");
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (relay.availableCredits() > 0 && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                assertEquals(0, relay.availableCredits(), "the sender ran out of credit");
                assertTrue(sent.get() <= CreditedStream.MAX_IN_FLIGHT, "at most MAX_IN_FLIGHT unacknowledged: " + sent.get());

                assertTrue(Launch.blocking(link).withDeadlineAfter(WAIT.toMillis(), TimeUnit.MILLISECONDS)
                        .confirm(RequestDigest.stamp(ConfirmRequest.newBuilder().setPolicyDigest("p").build(), "during-stall"))
                        .getConfirmed(), "a control call completes beside the stalled relay");

                StreamProbe<DnsQuery> queries = new StreamProbe<>();
                StreamObserver<DnsAnswer> answers = Launch.async(link).dns(queries);
                long query = queries.awaitFirst(WAIT).getQueryId();
                answers.onNext(DnsAnswer.newBuilder().setQueryId(query).setMessage(ByteString.copyFromUtf8("a1")).build());
                queries.await(WAIT);
                answers.onCompleted();
                assertEquals("a1", launch.service.dnsAnswers.get(query).getMessage().toStringUtf8(),
                        "a DNS query is answered beside the stalled relay");
                assertTrue(link.isOpen());
            } finally {
                relay.fail(Status.CANCELLED.withDescription("test over"));
                launch.service.stalled.countDown();
                sender.join(WAIT);
            }
        }
    }
}
