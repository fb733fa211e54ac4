-- Providers: named secrets bound to endpoint hosts. The value is sealed (AES-GCM, key outside the
-- database); the agent only ever sees a placeholder in the environment variable env_var.
CREATE TABLE providers (
    name       VARCHAR(63)   NOT NULL PRIMARY KEY,
    env_var    VARCHAR(128)  NOT NULL,
    hosts      VARCHAR(8192) NOT NULL,
    sealed     VARCHAR(16384) NOT NULL,
    created_at BIGINT        NOT NULL
)
;
