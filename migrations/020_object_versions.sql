-- object_versions(): the one definition of an object's versions (issue 30, issue 29 item 3).
-- history(), `kube-cdc history` and the web UI's object page read it; before, each had
-- its own query (history_rows, and two Go strings) with the same rule written three times.
--
-- One row per changes row of the object, in id order: what history() returns, plus what
-- a diff needs and who made the change in full:
--   - epoch, the version's object, and previous: the object of the key's row before it
--     in id order (of its cluster), even when that row is older than p_since; NULL when
--     there is none to compare with: the key's first row, the first row after a delete,
--     the first row of a new uid (a recreated object starts afresh);
--   - changed: the paths the version changed, as history() returns them (stored by the
--     sink since 017, computed here from previous otherwise);
--   - the actor's columns of change_actor (014; NULL when unknown), looked up only for
--     the clusters that hold an audit event of the key, or a deletecollection in its
--     namespace: elsewhere (most objects, most clusters) the lookup is a one-time filter.
-- p_cluster NULL reads every cluster that has a checkpoint; p_since NULL every version;
-- p_objects false leaves object and previous NULL (history(), which returns neither, does
-- not copy two documents a version out of the function).
--
-- PL/pgSQL, so that a session keeps its plan: generic from the first call (the key is
-- not the partition key, so a custom plan prunes nothing a generic one does not prune at
-- run time), without JIT (017: compiling it cost more than running it).
CREATE FUNCTION object_versions(p_resource text, p_namespace text, p_name text, p_cluster text DEFAULT NULL,
                                p_since timestamptz DEFAULT NULL, p_objects boolean DEFAULT true)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, epoch int,
               object jsonb, previous jsonb, changed text[],
               username text, impersonator text, user_agent text, verb text, subresource text,
               audit_id text, match text, distance interval)
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
    v_audited := ARRAY(SELECT k FROM unnest(v_clusters) k
                        WHERE EXISTS (SELECT 1 FROM audit_events e
                                       WHERE e.cluster = k AND e.api_group = v_group AND e.resource = v_resource
                                         AND e.namespace = p_namespace AND e.name IN (p_name, '')));
    RETURN QUERY
    SELECT h.id, h.cluster, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, h.reason,
           h.snapshot, h.epoch, CASE WHEN p_objects THEN h.object END, CASE WHEN p_objects THEN h.previous END,
           CASE WHEN h.object IS NOT NULL
                THEN array_remove(coalesce(h.changed, changed_paths(coalesce(h.previous, '{}'), h.object)),
                                  '/metadata/resourceVersion')
           END,
           a.username, a.impersonator, a.user_agent, a.verb, a.subresource, a.audit_id, a.match, a.distance
      FROM (SELECT c.id, c.cluster, c.api_group, c.resource, c.namespace, c.name, c.observed_at, c.op,
                   c.resource_version, c.epoch, c.uid, c.changed_by, c.inferred, c.reason, c.snapshot, c.object,
                   c.changed,
                   CASE WHEN lag(c.op) OVER w <> 'delete'
                             AND (lag(c.uid) OVER w = c.uid OR '' IN (c.uid, lag(c.uid) OVER w))
                        THEN lag(c.object) OVER w END AS previous
              FROM changes c
             WHERE c.resource = v_resource AND c.api_group = v_group
               AND c.namespace = p_namespace AND c.name = p_name
               AND c.cluster = ANY (v_clusters)
            WINDOW w AS (PARTITION BY c.cluster ORDER BY c.id)) h
      -- Each version's actor from its own columns, without reading the change again.
      LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.user_agent, x.verb, x.subresource, x.audit_id,
                                x.match, x.distance
                           FROM change_actor(h.cluster, h.api_group, h.resource, h.namespace, h.name, h.uid,
                                             h.resource_version, h.epoch, h.op, h.inferred,
                                             h.object -> 'metadata' ? 'deletionTimestamp', h.observed_at) x
                          WHERE h.cluster = ANY (v_audited)
                         -- A fence: kept in the subquery, the condition is a one-time filter
                         -- of each lookup.
                         OFFSET 0) a ON true
     WHERE p_since IS NULL OR h.observed_at >= p_since
     ORDER BY h.id;
END
$$;

-- history() keeps its signature and columns (005, 017), now read from object_versions.
CREATE OR REPLACE FUNCTION history(resource text, namespace text, name text, cluster text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, changed text[],
               username text, impersonator text, user_agent text, match text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$ SELECT v.id, v.cluster, v.observed_at, v.op, v.rv, v.uid, v.changed_by, v.inferred, v.reason, v.snapshot,
             v.changed, v.username, v.impersonator, v.user_agent, v.match
        FROM object_versions($1, $2, $3, $4, NULL, false) v $$;

DROP FUNCTION history_rows(text, text, text, text);
