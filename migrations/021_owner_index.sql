-- The objects an owner owns, found by its uid (the web UI's object page, "Owns"; issue 29
-- item 3). Without an index the read parsed the ownerReferences of every live object of
-- the owner's namespace: at 10M changes rows, 1,000 heap pages and 10–17 ms of the
-- page's 19–26 ms (docs/benchmarks.md, "History at scale").
--
-- objects_owner_first indexes the uid of an object's first owner reference (a
-- controller's, for nearly every owned object); objects_owner_more lists the few objects
-- with more than one, whose other owners the read checks by containment
-- (internal/read/store/sql/children.sql). Only live objects that name an owner have
-- entries: the write of a ConfigMap, a Secret or a Deployment pays the predicate alone,
-- an owned object's (a pod's status update) one index entry.
--
-- Building them reads objects under a SHARE lock (writes wait meanwhile); IF NOT EXISTS
-- lets an operator build them beforehand with CREATE INDEX CONCURRENTLY
-- (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS objects_owner_first ON objects (cluster, (object #>> '{metadata,ownerReferences,0,uid}'))
    WHERE deleted_at IS NULL AND object #>> '{metadata,ownerReferences,0,uid}' IS NOT NULL;
CREATE INDEX IF NOT EXISTS objects_owner_more ON objects (cluster)
    WHERE deleted_at IS NULL AND object #> '{metadata,ownerReferences,1}' IS NOT NULL;
