-- Time travel (docs/contract.md, "Epochs"): after an etcd restore or a cluster rebuilt
-- under the same name, resource versions restart below what the sink holds and are issued
-- again for other changes. Each sink counts the time travels it has seen of a resource
-- (scope) in its checkpoint's epoch; every row carries the epoch it was written in, and
-- versions are ordered by (epoch, resource_version), never by the RV alone.
ALTER TABLE objects ADD COLUMN epoch int NOT NULL DEFAULT 0;
ALTER TABLE changes ADD COLUMN epoch int NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN epoch int NOT NULL DEFAULT 0;

-- A reused RV in a new epoch is another change, not a replay.
ALTER TABLE changes DROP CONSTRAINT changes_once;
ALTER TABLE changes ADD CONSTRAINT changes_once
    UNIQUE (cluster, api_group, resource, namespace, name, epoch, resource_version, op);

-- One row per time travel a sink found: what revealed it, and the RVs on either side.
CREATE TABLE epochs (
    cluster         text        NOT NULL,
    sink            text        NOT NULL,
    api_group       text        NOT NULL,
    resource        text        NOT NULL,
    scope           text        NOT NULL,
    epoch           int         NOT NULL,  -- the new epoch
    reason          text        NOT NULL,  -- 'list-below-checkpoint', 'object-went-back', 'another-resource', 'cluster-identity'
    checkpoint_rv   bigint      NOT NULL,  -- the sink's checkpoint when it was found
    list_rv         bigint      NOT NULL,  -- the RV of the LIST that revealed it
    namespace       text,                  -- object-went-back: the object
    name            text,
    held_rv         bigint,                -- object-went-back: the RV the sink held of it
    detected_at     timestamptz NOT NULL,
    PRIMARY KEY (cluster, sink, api_group, resource, scope, epoch)
);
