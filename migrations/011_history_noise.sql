-- Noise control for history (README.md, "Noise control for history"): a change whose
-- differences from the previous version of the same uid all lie under the resource's
-- ignore paths (resources[].history) adds no changes row, while objects still takes it.
-- The decision is made in the write's transaction, against the objects row the change
-- replaces (or the batch's previous version of the key); this table counts, per sink,
-- resource and scope, the versions it left out of changes, for `kube-cdc status`.
-- Nothing else changes: history() and changed_paths() show what changes holds, so a
-- row's diff is against the previous row shown, ignored changes since included.
CREATE TABLE history_skipped (
    cluster    text        NOT NULL,
    sink       text        NOT NULL,
    api_group  text        NOT NULL,
    resource   text        NOT NULL,
    scope      text        NOT NULL,
    skipped    bigint      NOT NULL DEFAULT 0,  -- versions written to objects but not to changes
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, sink, api_group, resource, scope)
);
