-- What a launch needs besides the record, so start after stop (or after a gateway restart)
-- relaunches the same agent: the agent's argv/env/working directory, the workspace and the
-- attached providers' names, as one JSON document. Never a secret: provider values stay sealed
-- in the providers table.
CREATE TABLE sandbox_launches (
    sandbox_id  VARCHAR(63)     NOT NULL PRIMARY KEY,
    launch_spec VARCHAR(1048576) NOT NULL
)
;
