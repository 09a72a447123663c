-- history() of an object at fleet scale (issue 22): its cost was the diff of each version
-- against the one before it (changed_paths, ~18 µs a pair, ~250 versions for an object
-- of three clusters with a year of history) and planning its query at every call
-- (15-25 ms once the actor of each version is looked up through change_actors).
--
-- changes.changed: the paths (changed_paths) in which an update differs from the previous
-- version of the same uid, stored when the change is written. The sink computes it in
-- the statement that inserts the change, from the version it already holds: the batch's
-- previous version of the key (left out of changes as noise or not: the stage holds only
-- versions it writes or leaves out knowingly, see below), else the objects row the write
-- replaces. It stores it only where that version is certainly the key's previous changes
-- row of the same uid, so that it equals what history() computed when read:
--   - an update (creates, deletes and snapshots are left NULL: a create's paths are its
--     top-level keys, read in microseconds; deletes and snapshots are few);
--   - the previous version is of the same uid, not a delete, and carries its object;
--   - from the objects row, only when objects.in_changes says that version has a changes
--     row (false when noise control left it out of changes: the update's diff is then
--     against an older version, which the writer does not hold).
-- NULL otherwise, and for every row written before this migration: history() computes
-- those when read, as before. (IF NOT EXISTS: the benchmarks of older schemas add both
-- columns, which this build's sink writes, before they migrate.) Retention may since have dropped the previous version: the
-- stored paths still say what the update changed, where a diff computed when read would
-- compare the first row kept with nothing.
ALTER TABLE changes ADD COLUMN IF NOT EXISTS changed text[];

-- objects.in_changes: whether the row's version has a changes row (false: noise control,
-- resources[].history.ignorePaths, left it out). Rows before this migration: true, as
-- no version was left out before 011_history_noise, in the same release.
ALTER TABLE objects ADD COLUMN IF NOT EXISTS in_changes boolean NOT NULL DEFAULT true;

-- history() gains the actor (014_actors): the same rows and columns as 005_history's,
-- then who made the change (username, impersonator, user_agent) and how it was joined
-- (match: exact, nearest, NULL when unknown). A function's result type cannot be
-- altered: it is dropped and created again.
--
-- Its query is PL/pgSQL's (history_rows), whose plan a session keeps: planning it (the
-- changes partitions, each version's actor through change_actor) took 15-25 ms,
-- more than running it, and a LANGUAGE sql function with a SET clause is planned at every
-- call. The plan is generic from the first call (plan_cache_mode): the key is not the
-- partition key, so a custom plan prunes nothing a generic one does not prune at run
-- time. Without JIT: the plan (every partition, each with the actor view's subqueries) is
-- estimated above jit_above_cost at 10M rows, and compiling it took 0.9 s of a 1 s call.
-- history() keeps 005's signature (a PL/pgSQL function cannot name a parameter
-- and a result column alike) and only calls it.
CREATE FUNCTION history_rows(p_resource text, p_namespace text, p_name text, p_cluster text)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, changed text[],
               username text, impersonator text, user_agent text, match text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_resource text := split_part(p_resource, '.', 1);
    v_group    text := CASE WHEN strpos(p_resource, '.') > 0 THEN substr(p_resource, strpos(p_resource, '.') + 1) ELSE '' END;
    v_clusters text[];
    v_audited  text[];
BEGIN
    v_clusters := CASE WHEN p_cluster IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                       ELSE ARRAY[p_cluster] END;
    -- The clusters with an audit event of the key (or a deletecollection in its
    -- namespace): only their versions look their actor up. Where audit events are not
    -- received (most objects, most clusters) that lookup cost ~10-15 µs a version, a
    -- third of history().
    v_audited := ARRAY(SELECT k FROM unnest(v_clusters) k
                        WHERE EXISTS (SELECT 1 FROM audit_events e
                                       WHERE e.cluster = k AND e.api_group = v_group AND e.resource = v_resource
                                         AND e.namespace = p_namespace AND e.name IN (p_name, '')));
    RETURN QUERY
    SELECT h.id, h.cluster, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, h.reason,
           h.snapshot,
           CASE WHEN h.object IS NOT NULL
                THEN array_remove(coalesce(h.changed, changed_paths(coalesce(h.previous, '{}'), h.object)),
                                  '/metadata/resourceVersion')
           END,
           a.username, a.impersonator, a.user_agent, a.match
      FROM (SELECT c.id, c.cluster, c.api_group, c.resource, c.namespace, c.name, c.observed_at, c.op,
                   c.resource_version, c.epoch, c.uid, c.changed_by, c.inferred, c.reason, c.snapshot, c.object,
                   c.changed,
                   -- Only where changed is not stored: the object of the row before.
                   CASE WHEN c.changed IS NULL AND lag(c.op) OVER w <> 'delete'
                             AND (lag(c.uid) OVER w = c.uid OR '' IN (c.uid, lag(c.uid) OVER w))
                        THEN lag(c.object) OVER w END AS previous
              FROM changes c
             WHERE c.resource = v_resource AND c.api_group = v_group
               AND c.namespace = p_namespace AND c.name = p_name
               AND c.cluster = ANY (v_clusters)
            WINDOW w AS (PARTITION BY c.cluster ORDER BY c.id)) h
      -- Each version's actor from its own columns (change_actor, as the view change_actors
      -- defines it), without reading the change again.
      LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.user_agent, x.match
                           FROM change_actor(h.cluster, h.api_group, h.resource, h.namespace, h.name, h.uid,
                                             h.resource_version, h.epoch, h.op, h.inferred,
                                             h.object -> 'metadata' ? 'deletionTimestamp', h.observed_at) x
                          WHERE h.cluster = ANY (v_audited)
                         -- A fence: kept in the subquery, the condition is a one-time filter
                         -- of each lookup; pulled up, it became the join's filter, tested
                         -- after the lookup ran.
                         OFFSET 0) a ON true
     ORDER BY h.id;
END
$$;

DROP FUNCTION history(text, text, text, text);
CREATE FUNCTION history(resource text, namespace text, name text, cluster text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, changed text[],
               username text, impersonator text, user_agent text, match text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$ SELECT * FROM history_rows($1, $2, $3, $4) $$;
