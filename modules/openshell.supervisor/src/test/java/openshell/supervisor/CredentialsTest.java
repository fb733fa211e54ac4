package openshell.supervisor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import org.junit.jupiter.api.Test;

/** Credential providers and placeholder substitution, without sockets. */
class CredentialsTest {
    private static final String SECRET = "ghp_verysecretvalue";

    private static CredentialProvider provider(String name, String value, String... hosts) {
        return CredentialProvider.of(name, value.getBytes(StandardCharsets.US_ASCII), Set.of(hosts));
    }

    private static HttpHead head(String target, String... headerLines) throws IOException {
        StringBuilder s = new StringBuilder("GET " + target + " HTTP/1.1\r\nHost: api.test\r\n");
        for (String h : headerLines) {
            s.append(h).append("\r\n");
        }
        return HttpParserTest.request(s + "\r\n");
    }

    @Test
    void placeholderIsReplacedForABoundHostOnly() throws IOException {
        Credentials c = Credentials.of(List.of(provider("gh", SECRET, "api.test"), provider("gh-enterprise", "other", "ghe.test")));
        Credentials.Substitution ok = c.apply(head("/", "Authorization: token openshell-credential-gh"), "api.test");
        assertEquals(Optional.empty(), ok.refusedProvider());
        assertEquals("token " + SECRET, ok.headers().get(1).value());
        Credentials.Substitution elsewhere = c.apply(head("/", "Authorization: token openshell-credential-gh"), "evil.test");
        assertEquals(Optional.of("gh"), elsewhere.refusedProvider());
        // A longer provider name is its own placeholder, not gh's with a suffix.
        assertEquals(Optional.of("gh-enterprise"),
                c.apply(head("/", "X: openshell-credential-gh-enterprise"), "api.test").refusedProvider());
        assertEquals(Optional.of("gh"), c.apply(head("/?t=openshell-credential-gh"), "api.test").refusedProvider(),
                "a placeholder in the target is never sent on");
        Credentials.Substitution unknown = c.apply(head("/", "X: openshell-credential-nobody"), "api.test");
        assertEquals("openshell-credential-nobody", unknown.headers().get(1).value());
    }

    @Test
    void secretsStayOutOfTextAndErrors() {
        CredentialProvider p = provider("gh", SECRET, "api.test");
        assertFalse(p.toString().contains(SECRET));
        SupervisorException e = assertThrows(SupervisorException.class,
                () -> provider("gh", SECRET + "\n", "api.test"));
        assertFalse(e.getMessage().contains(SECRET));
        assertFalse(new HttpHead.Header("Authorization", SECRET).toString().contains(SECRET));
    }

    @Test
    void boundsOfProvidersAreEnforcedAtTheBound() {
        String atBound = "v".repeat(CredentialProvider.MAX_SECRET_BYTES);
        assertEquals(atBound, provider("big", atBound, "api.test").value());
        assertThrows(SupervisorException.class, () -> provider("big", atBound + "v", "api.test"));
        Set<String> hosts = new HashSet<>();
        for (int i = 0; i < CredentialProvider.MAX_HOSTS; i++) {
            hosts.add("h" + i + ".test");
        }
        assertTrue(CredentialProvider.of("many", new byte[] {'v'}, hosts).boundTo("h0.test"));
        hosts.add("one-more.test");
        assertThrows(SupervisorException.class, () -> CredentialProvider.of("many", new byte[] {'v'}, hosts));
        List<CredentialProvider> providers = new ArrayList<>();
        for (int i = 0; i < Credentials.MAX_PROVIDERS; i++) {
            providers.add(provider("p" + i, "v", "api.test"));
        }
        Credentials.of(providers);
        providers.add(provider("extra", "v", "api.test"));
        assertThrows(SupervisorException.class, () -> Credentials.of(providers));
        assertThrows(SupervisorException.class, () -> Credentials.of(List.of(provider("a", "v", "x.test"), provider("a", "w", "y.test"))));
    }

    @Test
    void aliasBound() {
        java.util.Map<String, java.net.InetAddress> m = new java.util.HashMap<>();
        for (int i = 0; i < HostAliases.MAX_ALIASES; i++) {
            m.put("h" + i + ".test", java.net.InetAddress.getLoopbackAddress());
        }
        assertTrue(HostAliases.of(m).lookup("H0.test.").isPresent());
        m.put("one-more.test", java.net.InetAddress.getLoopbackAddress());
        assertThrows(SupervisorException.class, () -> HostAliases.of(m));
        assertThrows(SupervisorException.class, () -> HostAliases.of(java.util.Map.of("not a name", java.net.InetAddress.getLoopbackAddress())));
    }
}
