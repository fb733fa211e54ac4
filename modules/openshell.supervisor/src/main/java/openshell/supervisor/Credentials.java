package openshell.supervisor;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The sandbox's credential providers and the substitution of placeholders in request headers.
 * A placeholder headed for a host its provider is not bound to is refused, so an agent cannot
 * trick the supervisor into sending a secret to the wrong endpoint.
 */
final class Credentials {
    /** Most providers per sandbox. */
    static final int MAX_PROVIDERS = 64;

    private final Map<String, CredentialProvider> byName;

    private Credentials(Map<String, CredentialProvider> byName) {
        this.byName = Map.copyOf(byName);
    }

    static Credentials none() {
        return new Credentials(Map.of());
    }

    static Credentials of(List<CredentialProvider> providers) {
        if (providers.size() > MAX_PROVIDERS) {
            throw new SupervisorException("at most " + MAX_PROVIDERS + " credential providers, got " + providers.size());
        }
        Map<String, CredentialProvider> m = new HashMap<>();
        for (CredentialProvider p : providers) {
            if (m.put(p.name(), p) != null) {
                throw new SupervisorException("credential provider " + p.name() + " is declared twice");
            }
        }
        return new Credentials(m);
    }

    /** Overwrites every secret in memory; the providers are unusable afterwards (supervisor shutdown). */
    void destroy() {
        byName.values().forEach(CredentialProvider::destroy);
    }

    /** The outcome of substituting: the headers to send, or the provider whose placeholder was misdirected. */
    record Substitution(List<HttpHead.Header> headers, Optional<String> refusedProvider) {
    }

    /**
     * @param head the request
     * @param host the admitted destination host name, or null for a bare address
     * @return the headers with placeholders replaced, or the refusal
     */
    Substitution apply(HttpHead head, String host) {
        if (byName.isEmpty()) {
            return new Substitution(head.headers(), Optional.empty());
        }
        // Placeholders are only substituted in headers; one in the target would leave as is: refuse it.
        Optional<String> inTarget = firstPlaceholder(head.target());
        if (inTarget.isPresent()) {
            return new Substitution(List.of(), inTarget);
        }
        List<HttpHead.Header> out = new ArrayList<>(head.headers().size());
        for (HttpHead.Header h : head.headers()) {
            if (!h.value().contains(CredentialProvider.PLACEHOLDER_PREFIX)) {
                out.add(h);
                continue;
            }
            StringBuilder replaced = new StringBuilder(h.value().length() + 64);
            Optional<String> refused = substitute(h.value(), host, replaced);
            if (refused.isPresent()) {
                return new Substitution(List.of(), refused);
            }
            out.add(new HttpHead.Header(h.name(), replaced.toString()));
        }
        return new Substitution(out, Optional.empty());
    }

    private Optional<String> firstPlaceholder(String text) {
        int at = text.indexOf(CredentialProvider.PLACEHOLDER_PREFIX);
        while (at >= 0) {
            String name = nameAt(text, at + CredentialProvider.PLACEHOLDER_PREFIX.length());
            if (byName.containsKey(name)) {
                return Optional.of(name);
            }
            at = text.indexOf(CredentialProvider.PLACEHOLDER_PREFIX, at + 1);
        }
        return Optional.empty();
    }

    /**
     * Copies {@code text} into {@code out}, each known placeholder replaced by its value when its
     * provider is bound to {@code host}; returns the first provider that is not (out is then partial).
     */
    private Optional<String> substitute(String text, String host, StringBuilder out) {
        int from = 0;
        int at;
        while ((at = text.indexOf(CredentialProvider.PLACEHOLDER_PREFIX, from)) >= 0) {
            int nameStart = at + CredentialProvider.PLACEHOLDER_PREFIX.length();
            String name = nameAt(text, nameStart);
            CredentialProvider p = byName.get(name);
            out.append(text, from, at);
            if (p == null) {
                out.append(text, at, nameStart + name.length());
            } else if (host != null && p.boundTo(host)) {
                out.append(p.value());
            } else {
                return Optional.of(name);
            }
            from = nameStart + name.length();
        }
        out.append(text, from, text.length());
        return Optional.empty();
    }

    /** The longest run of provider-name characters at {@code i} (a placeholder ends where the name does). */
    private static String nameAt(String text, int i) {
        int end = i;
        while (end < text.length() && isNameChar(text.charAt(end))) {
            end++;
        }
        return text.substring(i, end);
    }

    private static boolean isNameChar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    }
}
