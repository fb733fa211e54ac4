package openshell.cli;

import java.time.DateTimeException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import jakarta.json.JsonNumber;
import jakarta.json.JsonObject;
import jakarta.json.JsonString;
import jakarta.json.JsonValue;

/**
 * {@code sandbox logs} as text: each kept line as it is, except the supervisor's audit lines,
 * which become one readable line each (time, DENY or ALLOW, what was tried by which binary to
 * where, why, and the rule); and {@code --since} from what a user types to the instant the
 * gateway takes.
 */
final class SandboxLogView {
    /** {@code 90s}, {@code 10m}, {@code 2h}, {@code 1d}, or several ({@code 1h30m}). */
    private static final Pattern DURATION = Pattern.compile("(\\d{1,9})([smhd])");
    /** The longest {@code --since} duration taken: further back than this no log line is kept anyway. */
    static final Duration MAX_SINCE = Duration.ofDays(36_500);

    private SandboxLogView() {
    }

    /**
     * @param spec a duration back from now ({@code 10m}, {@code 1h30m}, {@code PT10M}) or a
     *             timestamp ({@code 2026-12-04T18:00:00Z}, with an offset, or local:
     *             {@code 2026-12-04T18:00}, {@code 2026-12-04})
     * @param now  the time the duration counts back from
     * @return the instant, ISO-8601 in UTC, as the gateway's {@code since} takes it
     */
    static String since(String spec, Instant now) {
        String s = spec.strip();
        try {
            Duration back = duration(s.toLowerCase(Locale.ROOT));
            if (back != null) {
                if (back.compareTo(MAX_SINCE) > 0) {
                    throw Main.usage("--since goes back at most " + MAX_SINCE.toDays() + " days, not " + spec);
                }
                return now.minus(back).toString();
            }
            return timestamp(s).toString();
        } catch (DateTimeException | ArithmeticException e) {
            throw Main.usage("--since takes a duration (30s, 10m, 2h, 1d, 1h30m) or a timestamp"
                    + " (2026-12-04T18:00:00Z, 2026-12-04T18:00 in local time, 2026-12-04), not '" + spec + "'");
        }
    }

    private static Duration duration(String s) {
        if (s.startsWith("p")) {
            return Duration.parse(s.toUpperCase(Locale.ROOT));
        }
        Matcher m = DURATION.matcher(s);
        Duration total = Duration.ZERO;
        int at = 0;
        while (m.find() && m.start() == at) {
            long n = Long.parseLong(m.group(1));
            total = total.plus(switch (m.group(2)) {
                case "s" -> Duration.ofSeconds(n);
                case "m" -> Duration.ofMinutes(n);
                case "h" -> Duration.ofHours(n);
                default -> Duration.ofDays(n);
            });
            at = m.end();
        }
        return at > 0 && at == s.length() ? total : null;
    }

    private static Instant timestamp(String s) {
        if (s.endsWith("Z") || s.endsWith("z")) {
            return Instant.parse(s.toUpperCase(Locale.ROOT));
        }
        if (s.matches(".*T.*[+-]\\d\\d:?\\d\\d$")) {
            return OffsetDateTime.parse(s).toInstant();
        }
        if (s.contains("T")) {
            return LocalDateTime.parse(s).atZone(ZoneId.systemDefault()).toInstant();
        }
        return LocalDate.parse(s).atStartOfDay(ZoneId.systemDefault()).toInstant();
    }

    /**
     * @param body the gateway's answer: {@code entries}, or (an older gateway) only {@code lines}
     * @return the text lines to print, oldest first
     */
    static List<String> lines(JsonObject body) {
        List<String> out = new ArrayList<>();
        if (!body.containsKey("entries")) {
            body.getJsonArray("lines").getValuesAs(JsonString.class).forEach(l -> out.add(l.getString()));
            return out;
        }
        for (JsonObject entry : body.getJsonArray("entries").getValuesAs(JsonObject.class)) {
            out.add(entry.get("record") instanceof JsonObject record ? describe(record) : entry.getString("line"));
        }
        return out;
    }

    /** @return one audit record in words: {@code TIME supervisor: DENY connect /usr/bin/curl -> host:443: why (cause C, rule R)} */
    static String describe(JsonObject r) {
        StringBuilder b = new StringBuilder(text(r, "time")).append(" supervisor: ");
        if (!r.containsKey("decision")) {
            // An event of the supervisor's (a degraded confinement): its fields as they are.
            b.append(text(r, "event"));
            r.forEach((k, v) -> {
                if (!k.equals("time") && !k.equals("event") && !k.equals("sandbox")) {
                    b.append(' ').append(k).append('=').append(plain(v));
                }
            });
            return b.toString();
        }
        b.append(text(r, "decision").toUpperCase(Locale.ROOT)).append(' ').append(text(r, "kind"));
        if (r.get("binary") instanceof JsonObject binary) {
            b.append(' ').append(text(binary, "path"));
        } else if (r.containsKey("identityUnresolved")) {
            b.append(" (binary unknown: ").append(text(r, "identityUnresolved")).append(')');
        }
        if (r.get("destination") instanceof JsonObject d) {
            String host = d.containsKey("host") ? text(d, "host") : text(d, "address");
            b.append(" -> ").append(host);
            if (d.get("port") instanceof JsonNumber port) {
                b.append(':').append(port.intValue());
            }
        }
        if (r.containsKey("method")) {
            b.append(' ').append(text(r, "method")).append(' ').append(text(r, "path"));
        }
        if (r.containsKey("reason")) {
            b.append(": ").append(text(r, "reason"));
        }
        List<String> facts = new ArrayList<>();
        if (r.containsKey("cause")) {
            facts.add("cause " + text(r, "cause"));
        }
        if (r.containsKey("rule")) {
            facts.add("rule " + text(r, "rule"));
        }
        if (r.get("wouldDeny") instanceof JsonObject would) {
            facts.add("enforcement audit: would deny, " + text(would, "cause"));
        }
        if (!facts.isEmpty()) {
            b.append(" (").append(String.join(", ", facts)).append(')');
        }
        return b.toString();
    }

    private static String text(JsonObject o, String key) {
        JsonValue v = o.get(key);
        return v == null ? "?" : plain(v);
    }

    private static String plain(JsonValue v) {
        return v instanceof JsonString s ? s.getString() : v.toString();
    }
}
