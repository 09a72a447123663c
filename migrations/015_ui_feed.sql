-- The web UI's feed (internal/ui): one cluster's changes in a time range, newest first
-- (observed_at DESC, then id DESC), keyset paginated ((observed_at, id) below the last
-- row shown), optionally filtered by namespace, resource, name or deletes. The indexes
-- below serve the feed and the deletes filter as a range scan ending at the range's end, so a page
-- costs the same at any depth and for any range, old or new: ordered by id alone, a
-- range far from the newest rows would walk every row after it first. They are created
-- on the parent table, so they hold when changes is partitioned by observed_at (each
-- partition gets its own copy, and a range reads only its partitions), and they add no
-- uniqueness.
--
-- On a large existing changes table the upgrade builds them inside the migration's
-- transaction (CREATE INDEX CONCURRENTLY cannot run in one): expect minutes at tens of
-- millions of rows, with writes to changes waiting meanwhile.
CREATE INDEX changes_feed ON changes (cluster, observed_at, id);
-- (Per-filter indexes on namespace, resource and name were dropped before any release:
-- migration 016 says why and drops them where a development build made them.)
-- Deletes (observed and inferred) are a small share of the rows: a filter on them would
-- otherwise walk the whole range to fill a page.
CREATE INDEX changes_feed_deletes ON changes (cluster, observed_at, id) WHERE op = 'delete';
