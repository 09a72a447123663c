-- Kubernetes Events for what they are, and "what changed before this broke" (issue 31).
-- docs/contract.md, "Events" and "why()".

-- events: one row per Kubernetes Event (core/v1 events and events.k8s.io/v1 events are
-- the same objects read through two APIs, with the same uid), written by the PostgreSQL
-- sink in place of objects and changes rows when it captures events
-- (sinks[].postgres.events.table, internal/sinks/postgres/events.go). An event that repeats
-- is the same object with a higher count (or series.count), so its row is updated in
-- place, guarded by (epoch, resource_version) like objects: never a diff, never a changes
-- row. The apiserver deletes events after its --event-ttl (1 h by default): the row stays,
-- deleted_at set, until the sink's own retention (sinks[].postgres.events.retention,
-- default 24 h) deletes it by observed_at.
CREATE TABLE events (
    cluster             text        NOT NULL,
    uid                 text        NOT NULL,
    api_group           text        NOT NULL,  -- the API it was last read through: '' or 'events.k8s.io'
    namespace           text        NOT NULL,
    name                text        NOT NULL,
    resource_version    bigint      NOT NULL,
    epoch               int         NOT NULL DEFAULT 0,
    type                text        NOT NULL DEFAULT '',  -- Normal, Warning
    reason              text        NOT NULL DEFAULT '',
    message             text        NOT NULL DEFAULT '',  -- core/v1 message, events.k8s.io/v1 note
    action              text        NOT NULL DEFAULT '',
    count               int         NOT NULL DEFAULT 1,   -- count (deprecatedCount); 1 when unset
    series_count        int,                              -- series.count, NULL for a singleton
    first_at            timestamptz,                      -- firstTimestamp, else eventTime, else creation
    last_at             timestamptz,                      -- the newest of series.lastObservedTime, lastTimestamp, eventTime
    -- The object the event is about (involvedObject, regarding). involved_resource is the
    -- plural of the live objects row with that uid when kube-cdc streams its resource, else
    -- NULL (events name a kind, not a resource).
    involved_api_group  text        NOT NULL DEFAULT '',
    involved_kind       text        NOT NULL DEFAULT '',
    involved_resource   text,
    involved_namespace  text        NOT NULL DEFAULT '',
    involved_name       text        NOT NULL DEFAULT '',
    involved_uid        text        NOT NULL DEFAULT '',
    involved_field_path text        NOT NULL DEFAULT '',
    reporting_component text        NOT NULL DEFAULT '',  -- reportingComponent/Controller, else source.component
    reporting_instance  text        NOT NULL DEFAULT '',  -- reportingInstance, else source.host
    observed_at         timestamptz NOT NULL,             -- when kube-cdc last wrote the row
    deleted_at          timestamptz,                      -- when the apiserver's delete (TTL) was seen; the row stays
    PRIMARY KEY (cluster, uid)
);

-- The sink's key index of events (live rows, by name) and the events beside an object.
CREATE INDEX events_live ON events (cluster, namespace, name) INCLUDE (uid, resource_version, epoch)
    WHERE deleted_at IS NULL;
CREATE INDEX events_involved ON events (cluster, involved_uid, last_at);
CREATE INDEX events_involved_key ON events (cluster, involved_namespace, involved_name, last_at);
-- Retention.
CREATE INDEX events_observed_at ON events (observed_at);

-- why(resource, namespace, name [, at [, lookback [, cluster]]]): what changed before the
-- object broke. The changes observed in (at - lookback, at] (default: the 30 minutes
-- before now) to
--   self        the object itself (every change: spec, status, metadata);
--   controller  its controllers up the chain (ownerReferences with controller: true, as
--               lineage() follows them, to live owners), depth 1, 2, …;
--   configmap   the ConfigMaps its pod spec references (volumes, projected volumes,
--               envFrom, env valueFrom; a workload's pod template, a CronJob's job's);
--   secret      the Secrets it references alike, and imagePullSecrets (their rows hold
--               keyed digests, never values: the change shows, the value does not);
--   node        its node (spec.nodeName);
--   service     the Services in its namespace whose selector its (pod template's) labels
--               match, live or deleted within the window;
--   ingress     the Ingresses routing to those Services (rules and default backend).
-- The object is read as it was at `at` (its newest changes row observed at or before it,
-- else its objects row), so a pod deleted since is still explained. Each change carries
-- who made it (change_actor(): the audit user, impersonator, user agent, how it was
-- joined) and changed_by (the field manager). changed is the stored changed paths of a
-- watch update (NULL where not stored: history() computes the diff). resource is spelled
-- as in history(); cluster NULL reads every cluster with a checkpoint. Rows in
-- observation order (observed_at, change_id). Read only; one statement.
CREATE FUNCTION why(resource text, namespace text, name text, at timestamptz DEFAULT now(),
                    lookback interval DEFAULT interval '30 minutes', cluster text DEFAULT NULL)
RETURNS TABLE (relation text, depth int, cluster text, api_group text, resource text, namespace text, name text,
               change_id bigint, observed_at timestamptz, op text, rv bigint, uid text, changed text[],
               changed_by text, username text, impersonator text, user_agent text, match text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$
WITH RECURSIVE
target AS (
    SELECT o.cluster, o.api_group, o.resource, o.namespace, o.name,
           coalesce((SELECT c.object FROM changes c
                      WHERE c.cluster = o.cluster AND c.api_group = o.api_group AND c.resource = o.resource
                        AND c.namespace = o.namespace AND c.name = o.name AND c.observed_at <= $4
                        AND c.object IS NOT NULL
                      ORDER BY c.observed_at DESC, c.id DESC LIMIT 1),
                    o.object) AS object
      FROM objects o
     WHERE o.resource = split_part($1, '.', 1)
       AND o.api_group = CASE WHEN strpos($1, '.') > 0 THEN substr($1, strpos($1, '.') + 1) ELSE '' END
       AND o.namespace = $2 AND o.name = $3
       AND o.cluster = ANY (CASE WHEN $6 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                                 ELSE ARRAY[$6] END)
),
chain AS (
    SELECT 0 AS depth, t.cluster, t.api_group, t.resource, t.namespace, t.name, t.object FROM target t
  UNION ALL
    SELECT c.depth + 1, c.cluster, p.api_group, p.resource, p.namespace, p.name, p.object
      FROM chain c
     CROSS JOIN LATERAL (SELECT r FROM jsonb_array_elements(CASE WHEN jsonb_typeof(c.object #> '{metadata,ownerReferences}') = 'array'
                                                                 THEN c.object #> '{metadata,ownerReferences}' END) AS e(r)
                          WHERE (r ->> 'controller')::boolean
                          LIMIT 1) AS ref(r)
      JOIN objects p ON p.cluster = c.cluster AND p.uid = ref.r ->> 'uid' AND p.deleted_at IS NULL
                    AND p.namespace IN (c.namespace, '') AND p.kind = ref.r ->> 'kind'
     WHERE c.depth < 32
),
spec AS (
    SELECT t.cluster, t.namespace,
           coalesce(t.object #> '{spec,jobTemplate,spec,template,spec}', t.object #> '{spec,template,spec}',
                    CASE WHEN t.api_group = '' AND t.resource = 'pods' THEN t.object -> 'spec' END) AS ps,
           coalesce(t.object #> '{spec,jobTemplate,spec,template,metadata,labels}',
                    t.object #> '{spec,template,metadata,labels}',
                    CASE WHEN t.api_group = '' AND t.resource = 'pods' THEN t.object #> '{metadata,labels}' END) AS labels
      FROM target t
),
services AS (
    SELECT s.cluster, s.namespace, s.name
      FROM spec p
      JOIN objects s ON s.cluster = p.cluster AND s.api_group = '' AND s.resource = 'services' AND s.namespace = p.namespace
                    AND jsonb_typeof(s.object #> '{spec,selector}') = 'object' AND s.object #> '{spec,selector}' <> '{}'
                    AND jsonb_typeof(p.labels) = 'object' AND p.labels @> (s.object #> '{spec,selector}')
                    AND (s.deleted_at IS NULL OR s.deleted_at > $4 - $5)
),
related AS (
    SELECT DISTINCT x.relation, x.depth, x.cluster, x.api_group, x.resource, x.namespace, x.name
      FROM (
        SELECT CASE WHEN c.depth = 0 THEN 'self' ELSE 'controller' END AS relation, c.depth, c.cluster,
               c.api_group, c.resource, c.namespace, c.name
          FROM chain c
        UNION ALL
        SELECT 'configmap', 0, p.cluster, '', 'configmaps', p.namespace, n #>> '{}'
          FROM spec p
         CROSS JOIN LATERAL (
               SELECT jsonb_path_query(p.ps, '$.volumes[*].configMap.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.volumes[*].projected.sources[*].configMap.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.*[*].envFrom[*].configMapRef.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.*[*].env[*].valueFrom.configMapKeyRef.name')) AS r(n)
        UNION ALL
        SELECT 'secret', 0, p.cluster, '', 'secrets', p.namespace, n #>> '{}'
          FROM spec p
         CROSS JOIN LATERAL (
               SELECT jsonb_path_query(p.ps, '$.volumes[*].secret.secretName')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.volumes[*].projected.sources[*].secret.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.*[*].envFrom[*].secretRef.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.*[*].env[*].valueFrom.secretKeyRef.name')
               UNION ALL SELECT jsonb_path_query(p.ps, '$.imagePullSecrets[*].name')) AS r(n)
        UNION ALL
        SELECT 'node', 0, p.cluster, '', 'nodes', '', p.ps ->> 'nodeName'
          FROM spec p WHERE p.ps ->> 'nodeName' IS NOT NULL
        UNION ALL
        SELECT 'service', 0, s.cluster, '', 'services', s.namespace, s.name FROM services s
        UNION ALL
        SELECT 'ingress', 0, i.cluster, 'networking.k8s.io', 'ingresses', i.namespace, i.name
          FROM services s
          JOIN objects i ON i.cluster = s.cluster AND i.api_group = 'networking.k8s.io' AND i.resource = 'ingresses'
                        AND i.namespace = s.namespace
                        AND (i.deleted_at IS NULL OR i.deleted_at > $4 - $5)
                        AND (jsonb_path_query_array(i.object, '$.spec.rules[*].http.paths[*].backend.service.name')
                             || jsonb_path_query_array(i.object, '$.spec.defaultBackend.service.name')) ? s.name
      ) x
     WHERE x.name IS NOT NULL AND x.name <> ''
)
SELECT r.relation, r.depth, r.cluster, r.api_group, r.resource, r.namespace, r.name,
       c.id, c.observed_at, c.op, c.resource_version, c.uid, c.changed, c.changed_by,
       a.username, a.impersonator, a.user_agent, a.match
  FROM related r
  JOIN changes c ON c.cluster = r.cluster AND c.api_group = r.api_group AND c.resource = r.resource
                AND c.namespace = r.namespace AND c.name = r.name
                AND c.observed_at > $4 - $5 AND c.observed_at <= $4
  LEFT JOIN LATERAL change_actor(c.cluster, c.api_group, c.resource, c.namespace, c.name, c.uid, c.resource_version,
                                 c.epoch, c.op, c.inferred, c.object -> 'metadata' ? 'deletionTimestamp',
                                 c.observed_at) a ON true
 ORDER BY c.observed_at, c.id, r.relation
$$;
