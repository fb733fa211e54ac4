package openshell.gateway;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

import openshell.protocol.LaunchBundles;

/**
 * What the operator, and only the operator, says about the network around every sandbox: host
 * aliases (a name the supervisors dial at a chosen address, host loopback included, so a local
 * service can be offered on purpose while policy and TLS still see the name) and extra trust
 * anchors for upstream TLS (a private CA), and the DNS server the supervisors ask instead of the
 * host's resolver (how tests keep every lookup on loopback). Trusted gateway configuration from the gateway's own
 * command line; a policy or an API request never changes it. Every launch's supervisor bundle
 * carries it.
 *
 * @param hostAliases         lower-case DNS host name to address
 * @param upstreamAuthorities certificates the supervisors trust for upstream TLS besides the system store
 * @param upstreamResolver    the DNS server (UDP) the supervisors ask for names no alias answers; empty: the host's resolver
 */
public record OperatorNetwork(Map<String, InetAddress> hostAliases, List<X509Certificate> upstreamAuthorities,
                              Optional<InetSocketAddress> upstreamResolver) {
    /** Most host aliases (the supervisor bundle's bound). */
    public static final int MAX_HOST_ALIASES = LaunchBundles.MAX_HOST_ALIASES;
    /** Most upstream trust anchors, over all files (the supervisor bundle's bound). */
    public static final int MAX_UPSTREAM_AUTHORITIES = LaunchBundles.MAX_UPSTREAM_AUTHORITIES;
    /** Largest PEM file of upstream trust anchors read. */
    public static final int MAX_AUTHORITY_FILE_BYTES = 256 * 1024;

    private static final Pattern HOST_NAME = Pattern.compile("[a-z0-9_]([a-z0-9_-]{0,62})(\\.[a-z0-9_]([a-z0-9_-]{0,62}))*");
    private static final Pattern IP_LITERAL = Pattern.compile("[0-9.]+|.*:.*");

    /** Validates and copies. */
    public OperatorNetwork {
        Objects.requireNonNull(hostAliases, "hostAliases");
        Objects.requireNonNull(upstreamAuthorities, "upstreamAuthorities");
        Objects.requireNonNull(upstreamResolver, "upstreamResolver");
        if (hostAliases.size() > MAX_HOST_ALIASES) {
            throw invalid(hostAliases.size() + " host aliases, at most " + MAX_HOST_ALIASES);
        }
        if (upstreamAuthorities.size() > MAX_UPSTREAM_AUTHORITIES) {
            throw invalid(upstreamAuthorities.size() + " upstream CA certificates, at most " + MAX_UPSTREAM_AUTHORITIES);
        }
        Map<String, InetAddress> aliases = new LinkedHashMap<>();
        hostAliases.forEach((name, address) -> {
            String canonical = hostName(name);
            checkAddress(canonical, Objects.requireNonNull(address, "address"));
            if (aliases.put(canonical, address) != null) {
                throw invalid("host alias " + canonical + " is declared twice");
            }
        });
        hostAliases = Collections.unmodifiableMap(aliases);
        upstreamAuthorities = List.copyOf(upstreamAuthorities);
    }

    /** @return no aliases, no extra anchors */
    public static OperatorNetwork none() {
        return new OperatorNetwork(Map.of(), List.of(), Optional.empty());
    }

    /**
     * @param alias {@code NAME=ADDRESS}, the address an IP literal (never looked up)
     * @return a copy of this configuration with the alias added
     * @throws GatewayException INVALID naming what is wrong
     */
    public OperatorNetwork withAlias(String alias) {
        int eq = alias.indexOf('=');
        if (eq < 1 || eq == alias.length() - 1) {
            throw invalid("--host-alias takes NAME=ADDRESS (e.g. api.demo.test=127.0.0.1): '" + alias + "'");
        }
        String name = hostName(alias.substring(0, eq));
        String literal = alias.substring(eq + 1);
        InetAddress address;
        try {
            address = InetAddress.ofLiteral(literal);
        } catch (IllegalArgumentException e) {
            throw invalid("host alias " + name + ": '" + literal + "' is not an IP address (aliases never look names up)");
        }
        if (hostAliases.containsKey(name)) {
            throw invalid("host alias " + name + " is declared twice");
        }
        Map<String, InetAddress> aliases = new LinkedHashMap<>(hostAliases);
        aliases.put(name, address);
        return new OperatorNetwork(aliases, upstreamAuthorities, upstreamResolver);
    }

    /**
     * @param endpoint {@code ADDRESS:PORT} ({@code [ADDRESS]:PORT} for IPv6), an IP literal (never looked up)
     * @return a copy of this configuration whose supervisors resolve through that server
     * @throws GatewayException INVALID naming what is wrong
     */
    public OperatorNetwork withResolver(String endpoint) {
        if (upstreamResolver.isPresent()) {
            throw invalid("--upstream-resolver is given twice");
        }
        int colon = endpoint.lastIndexOf(':');
        String literal = colon < 1 ? "" : endpoint.substring(0, colon);
        if (literal.startsWith("[") && literal.endsWith("]")) {
            literal = literal.substring(1, literal.length() - 1);
        } else if (literal.contains(":")) {
            literal = "";
        }
        InetAddress address;
        int port;
        try {
            address = InetAddress.ofLiteral(literal);
            port = Integer.parseInt(endpoint.substring(colon + 1));
        } catch (IllegalArgumentException e) {
            throw invalid("--upstream-resolver takes ADDRESS:PORT, an IP address (e.g. 127.0.0.1:5353 or [::1]:53): '"
                    + endpoint + "'");
        }
        if (port < 1 || port > 65535) {
            throw invalid("--upstream-resolver " + endpoint + ": the port is 1-65535");
        }
        if (address.isAnyLocalAddress() || address.isMulticastAddress()) {
            throw invalid("--upstream-resolver " + endpoint + " is not a host address");
        }
        return new OperatorNetwork(hostAliases, upstreamAuthorities, Optional.of(new InetSocketAddress(address, port)));
    }

    /**
     * @param pemFile a file of one or more PEM certificates, at most {@link #MAX_AUTHORITY_FILE_BYTES}
     * @return a copy of this configuration with the file's certificates added
     * @throws GatewayException INVALID naming the file and what is wrong
     */
    public OperatorNetwork withAuthorities(Path pemFile) {
        byte[] bytes;
        try (InputStream in = Files.newInputStream(pemFile)) {
            bytes = in.readNBytes(MAX_AUTHORITY_FILE_BYTES + 1);
        } catch (IOException e) {
            throw invalid("--upstream-ca " + pemFile + ": cannot read it (" + e.getMessage() + ")");
        }
        if (bytes.length > MAX_AUTHORITY_FILE_BYTES) {
            throw invalid("--upstream-ca " + pemFile + " is larger than " + MAX_AUTHORITY_FILE_BYTES + " bytes");
        }
        Collection<? extends Certificate> parsed;
        try {
            parsed = CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(bytes));
        } catch (CertificateException e) {
            throw invalid("--upstream-ca " + pemFile + " is not PEM X.509 certificates: " + e.getMessage());
        }
        if (parsed.isEmpty()) {
            throw invalid("--upstream-ca " + pemFile + " holds no certificate");
        }
        List<X509Certificate> all = new ArrayList<>(upstreamAuthorities);
        parsed.forEach(c -> all.add((X509Certificate) c));
        if (all.size() > MAX_UPSTREAM_AUTHORITIES) {
            throw invalid("--upstream-ca: " + all.size() + " certificates in all, at most " + MAX_UPSTREAM_AUTHORITIES);
        }
        return new OperatorNetwork(hostAliases, all, upstreamResolver);
    }

    /** Adds this configuration to one launch. */
    void applyTo(LaunchBundles.Request.Builder request) {
        hostAliases.forEach(request::hostAlias);
        upstreamAuthorities.forEach(request::upstreamAuthority);
        upstreamResolver.ifPresent(request::upstreamResolver);
    }

    private static String hostName(String name) {
        String n = name.toLowerCase(Locale.ROOT);
        if (n.endsWith(".")) {
            n = n.substring(0, n.length() - 1);
        }
        if (n.isEmpty() || n.length() > 253 || !HOST_NAME.matcher(n).matches()) {
            throw invalid("a host alias name is a DNS host name (letters, digits, '-', '_', dots; no '*'): '" + name + "'");
        }
        if (IP_LITERAL.matcher(n).matches()) {
            throw invalid("a host alias name is a name, not an address: '" + name + "'");
        }
        return n;
    }

    private static void checkAddress(String name, InetAddress address) {
        if (address.isAnyLocalAddress() || address.isMulticastAddress()) {
            throw invalid("host alias " + name + " maps to " + address.getHostAddress() + ", which is not a host address");
        }
    }

    private static GatewayException invalid(String message) {
        return new GatewayException(GatewayException.Reason.INVALID, message);
    }
}
