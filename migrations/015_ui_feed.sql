-- The web UI's feed (internal/ui): newest first (id DESC, the write order), keyset
-- paginated (id < the last id shown), for one cluster, optionally filtered by namespace,
-- resource, name or deletes. Each index below lets one of those filters read its page
-- from the index's end instead of sorting every row in the time range. They are created
-- on the parent table, so they hold when changes is partitioned (each partition gets its
-- own copy) and add no uniqueness.
--
-- On a large existing changes table the upgrade builds them inside the migration's
-- transaction (CREATE INDEX CONCURRENTLY cannot run in one): expect minutes at tens of
-- millions of rows, with writes to changes blocked meanwhile.
CREATE INDEX changes_feed ON changes (cluster, id);
CREATE INDEX changes_feed_namespace ON changes (cluster, namespace, id);
CREATE INDEX changes_feed_resource ON changes (cluster, api_group, resource, id);
CREATE INDEX changes_feed_name ON changes (cluster, name, id);
-- Deletes (observed and inferred) are a small share of the rows: a filter on them would
-- otherwise walk the whole feed to fill a page.
CREATE INDEX changes_feed_deletes ON changes (cluster, id) WHERE op = 'delete';
