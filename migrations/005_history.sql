-- "What changed in this object, and who did it" in plain SQL: `kube-cdc history` as
-- functions (README.md, "History"). Nothing here writes: an existing database only gains
-- the two functions.

-- changed_paths(from_object, to_object): the JSON Pointers (RFC 6901: '/spec/replicas',
-- '/metadata/labels/app.kubernetes.io~1name') whose values differ, sorted. It walks both
-- documents together: an object key or array index present on both sides is walked into
-- when both values are objects or both arrays; anything else that differs (a value
-- changed, added, removed, or of another type) is a path. An array that grew or shrank
-- lists the indexes past the shorter one. These are the paths of the JSON Patch operations
-- `kube-cdc history -o json` prints. '{}' when nothing differs.
CREATE FUNCTION changed_paths(from_object jsonb, to_object jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
WITH RECURSIVE walk(path, a, b) AS (
    SELECT ''::text, $1, $2
  UNION ALL
    SELECT walk.path || '/' || replace(replace(child.key, '~', '~0'), '/', '~1'), child.a, child.b
      FROM walk
      CROSS JOIN LATERAL (
            -- The CASEs keep each branch's function from seeing the other container type.
            SELECT k, walk.a -> k, walk.b -> k
              FROM (SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(walk.a) = 'object' THEN walk.a ELSE '{}' END)
                     UNION
                    SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(walk.b) = 'object' THEN walk.b ELSE '{}' END)) AS keys(k)
          UNION ALL
            SELECT i::text, walk.a -> i, walk.b -> i
              FROM generate_series(0, greatest(
                       jsonb_array_length(CASE WHEN jsonb_typeof(walk.a) = 'array' THEN walk.a ELSE '[]' END),
                       jsonb_array_length(CASE WHEN jsonb_typeof(walk.b) = 'array' THEN walk.b ELSE '[]' END)) - 1) AS i
           ) AS child(key, a, b)
     WHERE walk.a IS DISTINCT FROM walk.b
       AND jsonb_typeof(walk.a) = jsonb_typeof(walk.b) AND jsonb_typeof(walk.a) IN ('object', 'array')
)
SELECT coalesce(array_agg(path ORDER BY path COLLATE "C"), '{}')
  FROM walk
 WHERE a IS DISTINCT FROM b  -- a side is NULL where the key or index is missing
   AND NOT coalesce(jsonb_typeof(a) = jsonb_typeof(b) AND jsonb_typeof(a) IN ('object', 'array'), false)
$$;

-- history(resource, namespace, name [, cluster]): one row per changes row of the object,
-- in id order, with the paths the version changed. resource is kube-cdc's name for it,
-- as in status and metrics: 'configmaps' (core group), 'deployments.apps',
-- 'widgets.example.com'; namespace is '' for a cluster-scoped object; cluster NULL (the
-- default) reads every cluster with a checkpoint (one whose checkpoints were deleted is
-- read only when named).
--
-- changed compares the version's object with the one it changed: the previous row's
-- (per cluster, in id order). The first row, the first after a delete and the first of a
-- new uid have nothing to compare with: changed lists their top-level keys (where
-- `kube-cdc history -o json` replaces the whole document). '/metadata/resourceVersion' is
-- left out: it changes every time, and rv holds it. NULL for an inferred delete, which
-- carries no object.
--
-- SET search_path FROM CURRENT binds the function to the schema this migration runs in
-- (the configured one), so it works whatever the caller's search_path is.
CREATE FUNCTION history(resource text, namespace text, name text, cluster text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, changed text[])
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$
SELECT h.id, h.cluster, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, h.reason,
       h.snapshot,
       CASE WHEN h.object IS NOT NULL
            THEN array_remove(changed_paths(coalesce(h.previous, '{}'), h.object), '/metadata/resourceVersion')
       END
  FROM (SELECT c.id, c.cluster, c.observed_at, c.op, c.resource_version, c.uid, c.changed_by, c.inferred,
               c.reason, c.snapshot, c.object,
               -- The same rule as `kube-cdc history` (internal/sinks/postgres/history.go).
               CASE WHEN lag(c.op) OVER w <> 'delete' AND (lag(c.uid) OVER w = c.uid OR '' IN (c.uid, lag(c.uid) OVER w))
                    THEN lag(c.object) OVER w END AS previous
          FROM changes c
         -- $1 is 'plural' or 'plural.group': the group is what follows the first dot.
         WHERE c.resource = split_part($1, '.', 1)
           AND c.api_group = CASE WHEN strpos($1, '.') > 0 THEN substr($1, strpos($1, '.') + 1) ELSE '' END
           AND c.namespace = $2 AND c.name = $3
           -- An = ANY on the leading column of the changes_once index, not "$4 IS NULL OR
           -- c.cluster = $4", which would scan the whole table or index. Every cluster that wrote
           -- changes has a checkpoint.
           AND c.cluster = ANY (CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                                     ELSE ARRAY[$4] END)
        WINDOW w AS (PARTITION BY c.cluster ORDER BY c.id)) h
 ORDER BY h.id
$$;
