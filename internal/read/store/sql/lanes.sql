-- The lanes view (internal/read/ui /lanes): one lane per object that changed in
-- [@from, @to) in one cluster, the page of them @offset.. in (namespace, api_group,
-- resource, name) order, and every version of each lane in the range (at most @per_lane,
-- oldest first), in one statement. Rows are marks:
--   version  a changes row in the range; body is its object for the resources named by
--            @body_groups/@body_resources (those whose health is computed), else NULL;
--   before   the lane's newest version before @from with an object, for those resources
--            only: the health the range starts from;
--   owner    with @workload, the live controllers up from the lanes' newest controllers
--            (ownerReferences with controller true, as lineage() follows them), to the
--            top: what nests a Deployment's ReplicaSets and Pods under it.
-- total is the number of lanes in the range (every page). Optional filters are NULL.
-- The keys come from changes_feed (cluster, observed_at, id) over the range; each lane's
-- versions from changes_key_observed (cluster, api_group, resource, namespace, name,
-- observed_at, id); the owners from objects_live_uid (cluster, uid).
WITH RECURSIVE
keys AS (
    SELECT c.api_group, c.resource, c.namespace, c.name
      FROM changes c
     WHERE c.cluster = @cluster AND c.observed_at >= @from AND c.observed_at < @to
       AND (@namespace::text IS NULL OR c.namespace = @namespace)
       AND (@resource::text IS NULL OR (c.api_group = @group AND c.resource = @resource))
       AND (@name::text IS NULL OR CASE @name_match::text  -- NameMatch.sqlKind: as the feed reads it
                                      WHEN 'exact' THEN c.name = @name
                                      WHEN 'regex' THEN c.name ~* @name
                                      ELSE c.name ILIKE @name_like END)
     GROUP BY c.namespace, c.api_group, c.resource, c.name  -- the page's order: a sorted grouping needs no second sort
),
page AS (
    SELECT k.api_group, k.resource, k.namespace, k.name, count(*) OVER () AS total,
           (k.api_group, k.resource) IN (SELECT * FROM unnest(@body_groups::text[], @body_resources::text[])) AS bodies
      FROM keys k
     ORDER BY k.namespace, k.api_group, k.resource, k.name
     LIMIT @lanes OFFSET @offset
),
versions AS (
    SELECT p.total, p.api_group, p.resource, p.namespace, p.name, v.id, v.observed_at, v.op, v.inferred, v.snapshot,
           v.uid, v.resource_version, v.changed_by, coalesce(v.object ->> 'kind', '') AS kind,
           CASE WHEN p.bodies THEN v.object END AS body,
           jsonb_path_query_first(v.object, '$.metadata.ownerReferences[*] ? (@.controller == true)') AS ctrl
      FROM page p
     CROSS JOIN LATERAL (
           SELECT c.id, c.observed_at, c.op, c.inferred, c.snapshot, c.uid, c.resource_version, c.changed_by, c.object
             FROM changes c
            WHERE c.cluster = @cluster AND c.api_group = p.api_group AND c.resource = p.resource
              AND c.namespace = p.namespace AND c.name = p.name
              AND c.observed_at >= @from AND c.observed_at < @to
            ORDER BY c.observed_at, c.id
            LIMIT @per_lane) v
),
before AS (
    SELECT p.total, p.api_group, p.resource, p.namespace, p.name, b.id, b.observed_at, b.op, b.inferred, b.snapshot,
           b.uid, b.resource_version, b.changed_by, '' AS kind, b.object AS body, NULL::jsonb AS ctrl
      FROM page p
     CROSS JOIN LATERAL (
           SELECT c.id, c.observed_at, c.op, c.inferred, c.snapshot, c.uid, c.resource_version, c.changed_by, c.object
             FROM changes c
            WHERE c.cluster = @cluster AND c.api_group = p.api_group AND c.resource = p.resource
              AND c.namespace = p.namespace AND c.name = p.name
              AND c.observed_at < @from
            ORDER BY c.observed_at DESC, c.id DESC
            LIMIT 1) b
     WHERE p.bodies AND b.object IS NOT NULL
),
newest AS (
    SELECT DISTINCT n.uid FROM (
        SELECT DISTINCT ON (v.api_group, v.resource, v.namespace, v.name) v.ctrl ->> 'uid' AS uid
          FROM versions v
         WHERE @workload AND v.ctrl IS NOT NULL
         ORDER BY v.api_group, v.resource, v.namespace, v.name, v.observed_at DESC, v.id DESC) n
),
up AS (
    -- Each step a lookup by uid (LATERAL: a join here may scan the cluster's objects).
    SELECT 1 AS depth, o.api_group, o.resource, o.kind, o.namespace, o.name, o.uid, o.ctrl
      FROM newest n
     CROSS JOIN LATERAL (
           SELECT x.api_group, x.resource, x.kind, x.namespace, x.name, x.uid,
                  jsonb_path_query_first(x.object, '$.metadata.ownerReferences[*] ? (@.controller == true)') AS ctrl
             FROM objects x
            WHERE @workload AND x.cluster = @cluster AND x.uid = n.uid AND x.deleted_at IS NULL
            LIMIT 1) o
  UNION
    SELECT u.depth + 1, o.api_group, o.resource, o.kind, o.namespace, o.name, o.uid, o.ctrl
      FROM up u
     CROSS JOIN LATERAL (
           SELECT x.api_group, x.resource, x.kind, x.namespace, x.name, x.uid,
                  jsonb_path_query_first(x.object, '$.metadata.ownerReferences[*] ? (@.controller == true)') AS ctrl
             FROM objects x
            WHERE x.cluster = @cluster AND x.uid = u.ctrl ->> 'uid' AND x.deleted_at IS NULL
            LIMIT 1) o
     WHERE u.depth < 8 AND u.ctrl IS NOT NULL
)
SELECT 'version' AS mark, v.total, v.api_group, v.resource, v.namespace, v.name, v.id, v.observed_at, v.op, v.inferred,
       v.snapshot, v.uid, v.resource_version, v.changed_by, v.kind, v.body,
       coalesce(v.ctrl ->> 'uid', '') AS ctrl_uid, coalesce(v.ctrl ->> 'kind', '') AS ctrl_kind,
       coalesce(v.ctrl ->> 'name', '') AS ctrl_name
  FROM versions v
UNION ALL
SELECT 'before', b.total, b.api_group, b.resource, b.namespace, b.name, b.id, b.observed_at, b.op, b.inferred,
       b.snapshot, b.uid, b.resource_version, b.changed_by, b.kind, b.body, '', '', ''
  FROM before b
UNION ALL
SELECT DISTINCT 'owner', 0::bigint, u.api_group, u.resource, u.namespace, u.name, 0::bigint, NULL::timestamptz, '', false,
       false, u.uid, 0::bigint, '', u.kind, NULL::jsonb,
       coalesce(u.ctrl ->> 'uid', ''), coalesce(u.ctrl ->> 'kind', ''), coalesce(u.ctrl ->> 'name', '')
  FROM up u
