-- Sandbox records. Binary values are base64 text and times are epoch milliseconds, so the same
-- statements run on H2 and PostgreSQL without dialect branches.
CREATE TABLE sandboxes (
    id                 VARCHAR(63)     NOT NULL PRIMARY KEY,
    name               VARCHAR(63)     NOT NULL UNIQUE,
    driver             VARCHAR(63)     NOT NULL,
    backend_name       VARCHAR(63)     NOT NULL,
    backend_version    INTEGER         NOT NULL,
    descriptor         VARCHAR(100000) NOT NULL,
    dial_direction     VARCHAR(32)     NOT NULL,
    driver_state       VARCHAR(100000) NOT NULL,
    state              VARCHAR(32)     NOT NULL,
    runtime_generation BIGINT          NOT NULL,
    credential_epoch   BIGINT          NOT NULL,
    session_lineage    VARCHAR(26)     NOT NULL,
    policy_generation  BIGINT          NOT NULL,
    policy_document    VARCHAR(1048576) NOT NULL,
    row_version        BIGINT          NOT NULL,
    created_at         BIGINT          NOT NULL,
    updated_at         BIGINT          NOT NULL
)
;
