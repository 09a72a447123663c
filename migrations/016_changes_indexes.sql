-- Fewer indexes on changes (docs/benchmarks.md, "What changes' indexes cost a write"):
-- by migration 015 every write into changes paid for ten indexes, and the relist batch of
-- issue 22 wrote at 0.80× the throughput of the unpartitioned table of migration 010.
-- This migration drops three that others serve, and builds none, so on any installation
-- it takes milliseconds (DROP INDEX on the parent drops each partition's copy; it waits
-- for the ACCESS EXCLUSIVE lock on changes, i.e. for running reads and writes to end).
--
--   changes_cluster_observed_at (cluster, observed_at): a prefix of changes_feed
--     (cluster, observed_at, id), which serves every query it served (retention's
--     per-cluster month check, the UI's feed).
--   changes_key (cluster, api_group, resource, namespace, name, epoch, resource_version,
--     op): changes_key_observed (cluster, api_group, resource, namespace, name,
--     observed_at, id) has the same key prefix. history(), `kube-cdc history`, the UI's
--     object page read every row of one key and sort them by id: either index finds
--     them. The sink's replay guard (insertChangesSQL) asks whether the key has a row at
--     a given (epoch, RV, op): it now reads the key's rows through changes_key_observed
--     and checks those columns on the row, one key's versions at most, and only for the
--     rows the guard asks about (deletes, snapshot updates, rows at or below the objects
--     row's version).
--   changes_feed_name (cluster, name, observed_at, id): the UI's name filter reads
--     changes_key_observed instead, with name and observed_at as index conditions after
--     the key's leading columns (an index-only scan of the cluster's part of the
--     partitions in the range).
DROP INDEX changes_cluster_observed_at;
DROP INDEX changes_key;
DROP INDEX changes_feed_name;
