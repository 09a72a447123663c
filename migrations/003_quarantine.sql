-- Changes PostgreSQL cannot store (design §1.7, "A poison object never stops the stream"):
-- an object whose JSON jsonb rejects (the escape \u0000, legal in Kubernetes; a lone
-- UTF-16 surrogate), or any other value the server refuses with a data exception (SQLSTATE
-- class 22). Such a change goes here instead of objects and changes, in the same
-- transaction as the rest of its batch and the checkpoint, so one object never stops the
-- sink. A delete whose last state is the poison is still stored as a delete, without that
-- state, and its row here is resolved at once.
CREATE TABLE quarantine (
    cluster          text        NOT NULL,
    api_group        text        NOT NULL,
    api_version      text        NOT NULL,
    resource         text        NOT NULL,
    kind             text        NOT NULL,
    namespace        text        NOT NULL,  -- '' for cluster-scoped objects
    name             text        NOT NULL,
    uid              text        NOT NULL,
    resource_version bigint      NOT NULL,
    op               text        NOT NULL,
    inferred         boolean     NOT NULL DEFAULT false,
    snapshot         boolean     NOT NULL DEFAULT false,
    changed_by       text        NOT NULL DEFAULT '',
    observed_at      timestamptz NOT NULL,
    reason           text        NOT NULL,  -- why PostgreSQL cannot store it
    sqlstate         text        NOT NULL,  -- the error PostgreSQL gives (or would give) for it
    raw              bytea,                 -- the object's JSON exactly as received; NULL for an inferred delete
    quarantined_at   timestamptz NOT NULL DEFAULT now(),
    -- Set when a later change of the key was written to objects (or the delete itself,
    -- stored without its last state): objects is right again for this key.
    resolved_at      timestamptz,
    resolved_rv      bigint,
    -- A replayed batch quarantines nothing twice (the key of changes' changes_once).
    PRIMARY KEY (cluster, api_group, resource, namespace, name, resource_version, op)
);

-- Every batch resolves the unresolved rows of its keys, and status counts them.
CREATE INDEX quarantine_unresolved ON quarantine (cluster, api_group, resource, namespace, name)
    WHERE resolved_at IS NULL;
