-- Gateway replicas on one database (LeaseStore). Only new tables: a gateway of the previous
-- revision that is already running keeps working on this schema, but it takes no leases, so it
-- must be stopped before a replica of this revision starts (docs/architecture.md, "Replicas").
--
-- One row per replica that ever ran on this database: its stable id (kept in its state
-- directory), the API address other replicas forward to, the random id of its current process
-- and when it last said it was alive (epoch milliseconds). Never a secret.
CREATE TABLE gateway_replicas (
    replica_id   VARCHAR(63)  NOT NULL PRIMARY KEY,
    api_url      VARCHAR(512) NOT NULL,
    incarnation  VARCHAR(63)  NOT NULL,
    started_at   BIGINT       NOT NULL,
    heartbeat_at BIGINT       NOT NULL
)
;
-- The managing replica of each sandbox: holder, until when (epoch milliseconds; expired at that
-- instant) and a fencing epoch that only rises, by one each time the lease changes hands. A
-- replica that holds a supervisor's session of a sandbox another replica manages asks for it
-- (wanted_by); the holder hands it over at its next renewal when it has no session of its own.
CREATE TABLE sandbox_leases (
    sandbox_id  VARCHAR(63) NOT NULL PRIMARY KEY,
    holder      VARCHAR(63) NOT NULL,
    epoch       BIGINT      NOT NULL,
    expires_at  BIGINT      NOT NULL,
    wanted_by   VARCHAR(63)
)
;
