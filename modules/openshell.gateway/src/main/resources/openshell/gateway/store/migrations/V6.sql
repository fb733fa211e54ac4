-- When the gateway kept each log line (epoch milliseconds, the gateway's clock), so that
-- `openshell sandbox logs --since` can choose lines by time; lines kept before this column
-- existed have none and are left out by --since.
ALTER TABLE sandbox_logs ADD COLUMN logged_at BIGINT
;
