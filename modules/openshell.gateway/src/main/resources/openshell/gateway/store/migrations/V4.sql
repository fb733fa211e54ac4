-- A sandbox's log lines (the gateway's own events about it, and what its supervisor sends), so
-- `openshell sandbox logs` shows the same after a gateway restart. Bounded per sandbox by the
-- gateway (SessionHub.MAX_LOG_LINES, SessionHub.MAX_LOG_LINE_CHARS); never a secret.
CREATE TABLE sandbox_logs (
    sandbox_id VARCHAR(63)   NOT NULL,
    seq        BIGINT        NOT NULL,
    line       VARCHAR(4096) NOT NULL,
    PRIMARY KEY (sandbox_id, seq)
)
;
