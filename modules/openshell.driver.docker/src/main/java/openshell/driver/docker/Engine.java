package openshell.driver.docker;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Pattern;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.model.Version;
import com.github.dockerjava.core.DefaultDockerClientConfig;
import com.github.dockerjava.core.DockerClientConfig;
import com.github.dockerjava.core.DockerClientImpl;
import com.github.dockerjava.zerodep.ZerodepDockerHttpClient;

import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;

/**
 * One connection to a Docker Engine: docker-java's client at the negotiated API version, and the
 * one call docker-java cannot make for us: writing a launch bundle to a container's standard
 * input and then closing it (its attach never half-closes, and the programs read their bundle to
 * the end of the stream).
 */
final class Engine implements AutoCloseable {
    /** Longest wait to connect to the engine. */
    static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** Longest wait for one engine response. */
    static final Duration RESPONSE_TIMEOUT = Duration.ofSeconds(60);
    private static final Pattern CONTAINER_ID = Pattern.compile("[0-9a-f]{64}");

    private final String host;
    private final ApiVersion version;
    private final DockerClient client;

    private Engine(String host, ApiVersion version, DockerClient client) {
        this.host = host;
        this.version = version;
        this.client = client;
    }

    /**
     * @param host the engine's endpoint
     * @return a client at the negotiated version
     * @throws DriverException UNAVAILABLE if the engine cannot be reached or is too old
     */
    static Engine connect(String host) {
        if (host.startsWith("unix://") && !Files.exists(Path.of(URI.create(host).getPath()))) {
            throw unreachable(host, "no socket at " + URI.create(host).getPath());
        }
        DockerClient probe = client(host, null);
        Version v;
        try {
            v = probe.versionCmd().exec();
        } catch (RuntimeException e) {
            close(probe);
            throw unreachable(host, e.getMessage());
        }
        close(probe);
        ApiVersion negotiated = ApiVersion.negotiate(ApiVersion.parse(v.getApiVersion()), host);
        return new Engine(host, negotiated, client(host, negotiated));
    }

    private static DriverException unreachable(String host, String why) {
        return new DriverException(Kind.UNAVAILABLE, "dockerd is not reachable at " + host + " (" + why + "); start it"
                + " (dockerd, or: dockerd --data-root DIR &) or name another engine with --driver-setting docker.host=...");
    }

    private static DockerClient client(String host, ApiVersion version) {
        DefaultDockerClientConfig.Builder b = DefaultDockerClientConfig.createDefaultConfigBuilder().withDockerHost(host)
                .withDockerTlsVerify(false);
        if (version != null) {
            b.withApiVersion(version.toString());
        }
        DockerClientConfig config = b.build();
        ZerodepDockerHttpClient http = new ZerodepDockerHttpClient.Builder().dockerHost(config.getDockerHost())
                .connectionTimeout(CONNECT_TIMEOUT).responseTimeout(RESPONSE_TIMEOUT).maxConnections(16).build();
        return DockerClientImpl.getInstance(config, http);
    }

    private static void close(DockerClient c) {
        try {
            c.close();
        } catch (IOException e) {
            // nothing held that matters
        }
    }

    DockerClient docker() {
        return client;
    }

    ApiVersion version() {
        return version;
    }

    String host() {
        return host;
    }

    /**
     * Attaches to a created container's standard input (opened with {@code OpenStdin} and
     * {@code StdinOnce}), and returns the attachment; {@link Stdin#send} writes and half-closes.
     */
    Stdin attachStdin(String containerId) {
        if (!CONTAINER_ID.matcher(containerId).matches()) {
            throw new DriverException(Kind.FAILED, "not a container id: " + containerId);
        }
        URI uri = URI.create(host);
        SocketAddress address = host.startsWith("unix://") ? UnixDomainSocketAddress.of(uri.getPath())
                : new InetSocketAddress(uri.getHost(), uri.getPort());
        SocketChannel ch = null;
        try {
            ch = host.startsWith("unix://") ? SocketChannel.open(StandardProtocolFamily.UNIX) : SocketChannel.open();
            ch.connect(address);
            String request = "POST /v" + version + "/containers/" + containerId + "/attach?stream=1&stdin=1 HTTP/1.1\r\n"
                    + "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n";
            write(ch, request.getBytes(StandardCharsets.US_ASCII));
            String head = readHead(ch);
            if (!head.startsWith("HTTP/1.1 101") && !head.startsWith("HTTP/1.1 200")) {
                throw new DriverException(Kind.FAILED, "dockerd refused to attach to " + containerId.substring(0, 12) + ": "
                        + head.lines().findFirst().orElse(""));
            }
            return new Stdin(ch, containerId);
        } catch (IOException e) {
            closeQuietly(ch);
            throw new DriverException(Kind.FAILED, "cannot attach to container " + containerId.substring(0, 12) + " at "
                    + host + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(ch);
            throw e;
        }
    }

    /** An attached standard input: the bundle goes in once, then the stream is closed. */
    static final class Stdin implements AutoCloseable {
        private final SocketChannel channel;
        private final String containerId;

        private Stdin(SocketChannel channel, String containerId) {
            this.channel = channel;
            this.containerId = containerId;
        }

        /** Writes everything and half-closes: the container's program reads its end of stream. */
        void send(byte[] bytes) {
            try {
                write(channel, bytes);
                channel.shutdownOutput();
            } catch (IOException e) {
                throw new DriverException(Kind.FAILED, "container " + containerId.substring(0, 12)
                        + " did not take its launch bundle: " + e.getMessage(), e);
            }
        }

        @Override
        public void close() {
            closeQuietly(channel);
        }
    }

    private static void write(SocketChannel ch, byte[] bytes) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    /** The response head, up to the blank line; bounded so a confused peer cannot hold us. */
    private static String readHead(SocketChannel ch) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        ByteBuffer one = ByteBuffer.allocate(1);
        while (head.size() < 16 * 1024) {
            one.clear();
            if (ch.read(one) < 0) {
                break;
            }
            head.write(one.get(0));
            byte[] b = head.toByteArray();
            int n = b.length;
            if (n >= 4 && b[n - 4] == '\r' && b[n - 3] == '\n' && b[n - 2] == '\r' && b[n - 1] == '\n') {
                break;
            }
        }
        return head.toString(StandardCharsets.ISO_8859_1);
    }

    private static void closeQuietly(SocketChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException e) {
                // closing
            }
        }
    }

    @Override
    public void close() {
        close(client);
    }
}
