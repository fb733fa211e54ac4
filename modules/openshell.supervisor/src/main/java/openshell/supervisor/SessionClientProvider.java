package openshell.supervisor;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.List;
import java.util.function.Consumer;

import openshell.isolation.ByteChannel;
import openshell.isolation.ExecSession;
import openshell.isolation.ExecSpec;
import openshell.isolation.ExitStatus;
import openshell.isolation.LoopbackTarget;
import openshell.isolation.ProcessSignal;
import openshell.isolation.TerminalSize;
import openshell.protocol.TokenPair;
import openshell.supervisor.spi.GatewaySessionClient;

/**
 * The supervisor's gateway session as the {@link GatewaySessionClient} service its main loads:
 * {@link GatewaySession} over gRPC with the main's callback behind it. Exec relays pump the
 * boundary's streams into session messages, each stream on its own virtual thread, and send the
 * exit status only after both output streams are drained; forward relays do the same with one
 * connection to a loopback port inside the boundary.
 */
public final class SessionClientProvider implements GatewaySessionClient {
    /** Read size of one output pump. */
    static final int PUMP_BYTES = GatewaySession.MAX_OUTPUT_CHUNK;

    /** For {@link java.util.ServiceLoader}. */
    public SessionClientProvider() {
    }

    @Override
    public Session open(Target target, Callback callback) {
        // The bundle's pair is the lineage's first; the gateway supersedes it right after the hello.
        TokenPair first = new TokenPair(target.gatewayToken(), "", 0, Instant.EPOCH);
        GatewaySession session = GatewaySession.open(GatewaySession.channels(target.endpoint().toString()),
                target.sandboxId(), target.generation(), first, 1, new Bridge(callback));
        return new Session() {
            @Override
            public void log(List<String> lines) {
                session.log(lines);
            }

            @Override
            public boolean awaitExecsEnded(java.time.Duration wait) throws InterruptedException {
                return session.awaitExecsEnded(wait);
            }

            @Override
            public void close() {
                session.close();
            }
        };
    }

    /** The session's handler over the main's callback. */
    static final class Bridge implements GatewaySessionHandler {
        private final Callback callback;

        Bridge(Callback callback) {
            this.callback = callback;
        }

        @Override
        public PolicyVerdict applyPolicy(long generation, byte[] document) {
            Revision r = callback.applyPolicy(document);
            return new PolicyVerdict(r.loaded(), String.join("; ", r.reasons()));
        }

        @Override
        public void tokensRefreshed(TokenPair tokens) {
            callback.refreshTokens(tokens.gatewayToken(), tokens.sandboxToken(), tokens.credentialEpoch(),
                    tokens.expiresAt());
        }

        @Override
        public ExecControl exec(ExecCommand command, ExecOutput output) {
            ExecSpec.Builder spec = ExecSpec.builder(command.argv()).environment(command.environment())
                    .workingDirectory(command.workingDirectory());
            if (command.terminal()) {
                spec.pty(new TerminalSize(command.columns(), command.rows()));
            }
            ExecSession exec = callback.exec(spec.build());
            Thread out = pump(exec.stdout(), output::stdout);
            Thread err = pump(exec.stderr(), output::stderr);
            Thread.ofVirtual().name("exec-wait").start(() -> {
                try {
                    ExitStatus status = exec.process().awaitExit();
                    out.join();
                    err.join();
                    output.exit(switch (status) {
                        case ExitStatus.Exited e -> e.code();
                        case ExitStatus.Signaled s -> 128 + s.signal();
                    });
                } catch (InterruptedException e) {
                    output.error("interrupted");
                } catch (RuntimeException e) {
                    output.error("the exec was lost: " + e.getMessage());
                } finally {
                    exec.close();
                }
            });
            return new ExecControl() {
                @Override
                public void write(byte[] bytes) {
                    try {
                        exec.stdin().write(bytes);
                        exec.stdin().flush();
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                }

                @Override
                public void close() {
                    try {
                        exec.stdin().close();
                    } catch (IOException e) {
                        // The process already closed its end; nothing more to send.
                    }
                }

                @Override
                public void resize(int columns, int rows) {
                    try {
                        TerminalSize size = new TerminalSize(columns, rows);
                        exec.terminal().ifPresent(t -> t.resize(size));
                    } catch (RuntimeException e) {
                        // Out of range or the process ended: a resize is advisory.
                    }
                }

                @Override
                public void signal(int number) {
                    for (ProcessSignal s : ProcessSignal.values()) {
                        if (s.number() == number) {
                            try {
                                exec.process().signal(s);
                            } catch (RuntimeException e) {
                                // The process already ended; its exit status is on its way.
                            }
                            return;
                        }
                    }
                }

                @Override
                public void terminate() {
                    try {
                        exec.process().terminate();
                    } catch (RuntimeException e) {
                        // Already gone.
                    }
                }
            };
        }

        @Override
        public ExecControl forward(int port, ExecOutput output) {
            ByteChannel connection = callback.forward(LoopbackTarget.of(port));
            Thread.ofVirtual().name("forward-pump").start(() -> {
                byte[] buffer = new byte[PUMP_BYTES];
                try (InputStream in = connection.input()) {
                    int n;
                    while ((n = in.read(buffer)) >= 0) {
                        if (n > 0) {
                            output.stdout(java.util.Arrays.copyOf(buffer, n));
                        }
                    }
                    output.exit(0);
                } catch (IOException e) {
                    output.error("the forwarded connection to port " + port + " broke: " + e.getMessage());
                } finally {
                    connection.close();
                }
            });
            return new ExecControl() {
                @Override
                public void write(byte[] bytes) {
                    try {
                        connection.output().write(bytes);
                        connection.output().flush();
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                }

                @Override
                public void close() {
                    try {
                        // Half-close: the service in the sandbox sees end of input and may still answer.
                        connection.output().close();
                    } catch (IOException e) {
                        // The connection already ended; its end is on its way.
                    }
                }

                @Override
                public void resize(int columns, int rows) {
                    // A connection has no terminal.
                }

                @Override
                public void signal(int number) {
                    // A connection has no process to signal.
                }

                @Override
                public void terminate() {
                    connection.close();
                }
            };
        }

        private static Thread pump(InputStream in, Consumer<byte[]> sink) {
            return Thread.ofVirtual().name("exec-pump").start(() -> {
                byte[] buffer = new byte[PUMP_BYTES];
                try (in) {
                    int n;
                    while ((n = in.read(buffer)) >= 0) {
                        if (n > 0) {
                            sink.accept(java.util.Arrays.copyOf(buffer, n));
                        }
                    }
                } catch (IOException e) {
                    // The stream ended with the process or the boundary; the exit status tells which.
                }
            });
        }
    }
}
