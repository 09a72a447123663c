-- Resolved watermarks (docs/contract.md, "Resolved watermarks"): how far each sink is
-- complete, for consumers that must not act on a partial picture. Nothing here writes:
-- the views read checkpoints, which every batch writes in the transaction that writes
-- its rows, and which watch bookmarks move while a resource is quiet.
--
-- resolved: one row per (cluster, sink, api_group, resource, scope). Its meaning: every
-- change of that resource (in that scope) with (epoch, resource_version) at or below
-- (epoch, resolved_rv) is in `changes` and applied to `objects` (or, for a change
-- PostgreSQL could not store, in `quarantine`), and no later transaction adds an earlier
-- change: what comes later is above the watermark, or a snapshot row (snapshot = true:
-- `resnapshot --full`, a drift repair) that repeats a version the cluster still has, at
-- that version's own resource_version. resolved_at is when the watermark was last written (the writing
-- transaction's start): at resolved_at the sink was complete up to resolved_rv; it is not
-- the time the cluster made the change at resolved_rv. resolved_rv is 0 while the relist
-- that starts a new epoch (a time travel) runs: nothing of that epoch is resolved yet.
-- scope is '' for a resource configured once without namespaces or selectors.
--
-- A consumer reads changes only up to the watermark, e.g. an incremental load:
--   SELECT c.* FROM changes c JOIN resolved r USING (cluster, api_group, resource)
--    WHERE r.sink = 'warehouse' AND r.scope = '' AND c.id > $last_id
--      AND (c.epoch, c.resource_version) <= (r.epoch, r.resolved_rv);
CREATE VIEW resolved AS
SELECT cluster, sink, api_group, resource, scope, epoch,
       resource_version AS resolved_rv,
       updated_at       AS resolved_at
  FROM checkpoints;

-- resolved_resources: the same per resource, over all of its scopes: the least (epoch,
-- resolved_rv) of the scopes (each scope holds at least that much of its own objects),
-- and the latest resolved_at (by then every scope had reached its current watermark).
-- A resource configured once has one scope, and the same numbers as in resolved.
CREATE VIEW resolved_resources AS
SELECT cluster, sink, api_group, resource,
       lowest[1]::int AS epoch,
       lowest[2]      AS resolved_rv,
       resolved_at,
       scopes
  FROM (SELECT cluster, sink, api_group, resource,
               min(ARRAY[epoch::bigint, resource_version]) AS lowest,
               max(updated_at) AS resolved_at,
               count(*)        AS scopes
          FROM checkpoints
         GROUP BY cluster, sink, api_group, resource) AS per_resource;
