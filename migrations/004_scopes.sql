-- Scopes own their keys (design §1.9): an inferred delete says why it happened.
--   'gone'          the object is not in the cluster (a relist lacked it; a lookup found
--                   no object with its uid)
--   'out-of-scope'  the object still exists, but no configured scope covers it any more
--                   (relabelled out of a selector, a namespace or selector removed from
--                   the configuration)
-- NULL for observed changes.
ALTER TABLE changes ADD COLUMN reason text;
-- The reason of the delete that tombstoned the row (NULL while alive and for observed
-- deletes), so "rows that left every scope" is a plain query.
ALTER TABLE objects ADD COLUMN delete_reason text;

-- Retention deletes one cluster's history by age (several clusters may share a database).
CREATE INDEX changes_cluster_observed_at ON changes (cluster, observed_at);
DROP INDEX changes_observed_at;

-- A relist's snapshots may revive rows an inferred delete tombstoned wrongly; this small
-- index (inferred tombstones only) lets the write skip that step at once when there are
-- none.
CREATE INDEX objects_inferred ON objects (cluster, api_group, resource)
    WHERE deleted_at IS NOT NULL AND delete_inferred;
