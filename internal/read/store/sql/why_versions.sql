-- What changed before an object broke, with each change's diff: why()'s rows (migration
-- 019, the one definition of what is related) and, for each, the version's object, the
-- object it changed, and whether kube-cdc inferred it and why, as object_versions()
-- (migration 020, the one definition of a version's previous object) gives them.
-- object_versions is read once per related object, from the window's first change of it
-- on, not once per row. The web UI's /why page.
WITH w AS MATERIALIZED (
    SELECT * FROM why(@resource, @namespace, @name, @at, @lookback, @cluster)
),
related AS (
    SELECT w.cluster, w.api_group, w.resource, w.namespace, w.name, min(w.observed_at) AS since
      FROM w GROUP BY 1, 2, 3, 4, 5
),
versions AS (
    SELECT v.id, v.object, v.previous, v.inferred, v.reason
      FROM related r
     CROSS JOIN LATERAL object_versions(r.resource || CASE WHEN r.api_group <> '' THEN '.' || r.api_group ELSE '' END,
                                        r.namespace, r.name, r.cluster, r.since) v
)
SELECT w.relation, w.depth, w.cluster, w.api_group, w.resource, w.namespace, w.name, w.change_id, w.observed_at, w.op,
       w.rv, w.uid, coalesce(w.changed, '{}') AS changed, coalesce(w.changed_by, '') AS changed_by,
       w.username, w.impersonator, w.user_agent, w.match, v.object, v.previous,
       coalesce(v.inferred, false) AS inferred, coalesce(v.reason, '') AS reason
  FROM w LEFT JOIN versions v ON v.id = w.change_id
 ORDER BY w.observed_at, w.change_id, w.relation
