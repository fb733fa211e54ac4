package openshell.gateway;

import java.io.StringReader;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonException;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import jakarta.json.JsonReader;
import jakarta.json.JsonString;
import openshell.gateway.store.SandboxStore.LogLine;

/**
 * {@code GET /v1/sandboxes/{ref}/logs[?denied=true][&since=INSTANT]}: a sandbox's kept lines, each
 * also as an entry that says where it came from and when the gateway kept it. Sources:
 * {@code agent} (its stdout), {@code agent-stderr}, {@code supervisor} (its notices, and its audit
 * lines, which the supervisor marks {@link #DECISION} and which carry the parsed audit object as
 * {@code record}), {@code gateway} (the gateway's own events). The supervisor marks any agent
 * line that begins like one of its own as stdout, so a workload cannot forge a decision here.
 * {@code denied=true} keeps only audit lines whose {@code decision} is {@code deny};
 * {@code since} keeps lines kept at or after the instant (a line kept before the gateway recorded
 * times has none and is left out).
 */
final class LogQuery {
    /** The supervisor's mark of an audit line ({@code AuditForward.PREFIX} there). */
    static final String DECISION = "[decision] ";
    /** The supervisor's mark of a notice of its own about the log ({@code AgentLog}). */
    static final String NOTICE = "[openshell] ";
    /** The mark of a line of the agent's stderr ({@code AgentLog.STDERR}). */
    static final String STDERR = "[stderr] ";
    /** A line in the gateway's own voice ({@code SandboxLogs.gatewayLine}). */
    private static final Pattern GATEWAY = Pattern.compile("^\\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z gateway: .*");

    /**
     * @param denied only denials
     * @param since  only lines kept at or after it
     */
    record Filter(boolean denied, Optional<Instant> since) {
        /**
         * @param denied the {@code denied} query parameter, if given: {@code true} or {@code false}
         * @param since  the {@code since} query parameter, if given: an ISO-8601 instant
         * @return the filter
         * @throws GatewayException INVALID for another value
         */
        static Filter of(Optional<String> denied, Optional<String> since) {
            boolean onlyDenied = denied.map(d -> switch (d) {
                case "true" -> true;
                case "false" -> false;
                default -> throw new GatewayException(GatewayException.Reason.INVALID, "denied is true or false, not '"
                        + d + "'");
            }).orElse(false);
            Optional<Instant> from;
            try {
                from = since.map(Instant::parse);
            } catch (DateTimeParseException e) {
                throw new GatewayException(GatewayException.Reason.INVALID, "since must be an ISO-8601 instant such as"
                        + " 2026-12-04T18:00:00Z, not '" + since.orElse("") + "'");
            }
            return new Filter(onlyDenied, from);
        }

        boolean keeps(LogLine line, JsonObject entry) {
            if (since.isPresent() && line.loggedAt().map(t -> t.isBefore(since.get())).orElse(true)) {
                return false;
            }
            return !denied || entry.get("record") instanceof JsonObject r && r.get("decision") instanceof JsonString d
                    && d.getString().equals("deny");
        }
    }

    private LogQuery() {
    }

    /**
     * @param lines  the sandbox's kept lines, oldest first
     * @param filter which to answer
     * @return {@code {"lines": [...], "entries": [...]}}, both the chosen lines, oldest first
     */
    static JsonObject answer(List<LogLine> lines, Filter filter) {
        JsonArrayBuilder texts = Json.createArrayBuilder();
        JsonArrayBuilder entries = Json.createArrayBuilder();
        for (LogLine line : lines) {
            JsonObject entry = entry(line);
            if (filter.keeps(line, entry)) {
                texts.add(line.line());
                entries.add(entry);
            }
        }
        return Json.createObjectBuilder().add("lines", texts).add("entries", entries).build();
    }

    /** @return one line as an entry: its source, when it was kept, the line, and an audit line's object */
    static JsonObject entry(LogLine line) {
        String text = line.line();
        JsonObjectBuilder b = Json.createObjectBuilder();
        line.loggedAt().ifPresent(t -> b.add("time", t.toString()));
        Optional<JsonObject> record = text.startsWith(DECISION) ? object(text.substring(DECISION.length())) : Optional.empty();
        String source;
        if (text.startsWith(DECISION)) {
            // One cut at SandboxLogs.MAX_LINE_CHARS is no longer JSON: still the supervisor's, without its record.
            source = "supervisor";
            record.ifPresent(r -> b.add("record", r));
        } else if (text.startsWith(NOTICE)) {
            source = "supervisor";
        } else if (text.startsWith(STDERR)) {
            source = "agent-stderr";
        } else if (GATEWAY.matcher(text).matches()) {
            source = "gateway";
        } else {
            source = "agent";
        }
        return b.add("source", source).add("line", text).build();
    }

    private static Optional<JsonObject> object(String text) {
        try (JsonReader r = Json.createReader(new StringReader(text))) {
            return Optional.of(r.readObject());
        } catch (JsonException | IllegalStateException e) {
            return Optional.empty();
        }
    }
}
