-- Tables of design §4 (a contract): column names are what users query.

-- Current state: one row per object ever seen, soft-deleted (deleted_at) by default.
CREATE TABLE objects (
    cluster          text        NOT NULL,
    api_group        text        NOT NULL,  -- '' for the core group
    api_version      text        NOT NULL,
    resource         text        NOT NULL,  -- plural: 'pods'
    kind             text        NOT NULL,
    namespace        text        NOT NULL,  -- '' for cluster-scoped objects
    name             text        NOT NULL,
    uid              text        NOT NULL,
    resource_version bigint      NOT NULL,
    labels           jsonb       NOT NULL DEFAULT '{}',
    object           jsonb,                 -- NULL only for a row first seen as an inferred delete
    changed_by       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),  -- first seen with this uid
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,           -- NULL while the object exists
    delete_inferred  boolean     NOT NULL DEFAULT false,  -- deleted_at came from a relist, not a DELETE event
    PRIMARY KEY (cluster, api_group, resource, namespace, name)
);

-- The key index (live rows of one resource) and the kind views read only live rows:
-- a partial covering index lets them skip tombstones and the object column.
CREATE INDEX objects_live ON objects (cluster, api_group, resource)
    INCLUDE (namespace, name, uid, resource_version)
    WHERE deleted_at IS NULL;

-- Append-only audit trail, one row per change.
CREATE TABLE changes (
    id               bigserial   PRIMARY KEY,
    cluster          text        NOT NULL,
    api_group        text        NOT NULL,
    resource         text        NOT NULL,
    namespace        text        NOT NULL,
    name             text        NOT NULL,
    uid              text        NOT NULL,
    resource_version bigint      NOT NULL,
    op               text        NOT NULL CHECK (op IN ('create', 'update', 'delete')),
    inferred         boolean     NOT NULL DEFAULT false,
    snapshot         boolean     NOT NULL DEFAULT false,
    object           jsonb,
    changed_by       text        NOT NULL DEFAULT '',
    observed_at      timestamptz NOT NULL,
    -- A replayed batch inserts nothing twice.
    CONSTRAINT changes_once UNIQUE (cluster, api_group, resource, namespace, name, resource_version, op)
);

-- Retention deletes by age.
CREATE INDEX changes_observed_at ON changes (observed_at);

-- Per sink and resource stream: every change up to resource_version is in this database.
-- Written in the same transaction as the rows it covers.
CREATE TABLE checkpoints (
    cluster          text        NOT NULL,
    sink             text        NOT NULL,
    api_group        text        NOT NULL,
    resource         text        NOT NULL,
    scope            text        NOT NULL DEFAULT '',  -- '' for the whole resource, else a digest of namespaces and selectors
    resource_version bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, sink, api_group, resource, scope)
);
