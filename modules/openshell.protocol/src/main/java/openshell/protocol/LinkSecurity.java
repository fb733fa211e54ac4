package openshell.protocol;

import java.io.IOException;
import java.util.List;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;

/**
 * The steps every link takes before HTTP/2: Unix peer credentials, then TLS 1.3 with the
 * runtime as server, whichever side dialed.
 */
final class LinkSecurity {
    static final String TLS_PROTOCOL = "TLSv1.3";
    static final String ALPN_H2 = "h2";

    private LinkSecurity() {
    }

    static void checkPeer(UnixPeerPolicy policy, ChannelSocket socket) {
        if (!socket.isUnix()) {
            return;
        }
        UnixDomainPrincipal principal;
        try {
            principal = socket.channel().getOption(ExtendedSocketOptions.SO_PEERCRED);
        } catch (IOException | UnsupportedOperationException e) {
            throw new ProtocolException(Refusal.PEER_REFUSED, "cannot read SO_PEERCRED", e);
        }
        policy.check(new UnixPeer(principal.user().getName(), principal.group().getName(), socket.channel()));
    }

    static SSLSocket serve(SSLContext context, String serverName, ChannelSocket socket) throws IOException {
        SSLSocket tls = (SSLSocket) context.getSocketFactory().createSocket(socket, serverName, 0, true);
        tls.setUseClientMode(false);
        SSLParameters parameters = tls.getSSLParameters();
        parameters.setProtocols(new String[] {TLS_PROTOCOL});
        parameters.setApplicationProtocols(new String[] {ALPN_H2});
        tls.setSSLParameters(parameters);
        tls.startHandshake();
        return tls;
    }

    static SSLSocket call(SSLContext context, String serverName, ChannelSocket socket) throws IOException {
        SSLSocket tls = (SSLSocket) context.getSocketFactory().createSocket(socket, serverName, 0, true);
        tls.setUseClientMode(true);
        SSLParameters parameters = tls.getSSLParameters();
        parameters.setProtocols(new String[] {TLS_PROTOCOL});
        parameters.setApplicationProtocols(new String[] {ALPN_H2});
        parameters.setServerNames(List.of(new SNIHostName(serverName)));
        // Checks the leaf's DNS SAN against the server name, on top of the pinned CA.
        parameters.setEndpointIdentificationAlgorithm("HTTPS");
        tls.setSSLParameters(parameters);
        tls.startHandshake();
        return tls;
    }
}
