-- Why and when a sandbox was recorded FAILED by the gateway's observer (SandboxObserver): one row
-- per sandbox, for the launch (runtime generation) that failed; a later launch's record shows it
-- only while that generation is the current one. Never a secret.
CREATE TABLE sandbox_failures (
    sandbox_id         VARCHAR(63)   NOT NULL PRIMARY KEY,
    runtime_generation BIGINT        NOT NULL,
    cause              VARCHAR(4096) NOT NULL,
    failed_at          BIGINT        NOT NULL
)
;
