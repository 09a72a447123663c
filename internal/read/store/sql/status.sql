-- Every checkpoint of the cluster (one per sink, resource and scope) with its epoch, the
-- versions left out of history as noise, and the resource's object and quarantine counts.
SELECT c.sink, c.api_group, c.resource, c.scope, c.resource_version, c.updated_at,
       coalesce(o.live, 0), coalesce(o.deleted, 0), coalesce(q.quarantined, 0),
       c.epoch, coalesce(e.reason, ''), e.detected_at, coalesce(h.skipped, 0)
  FROM checkpoints c
  LEFT JOIN LATERAL (SELECT reason, detected_at FROM epochs
                      WHERE cluster = c.cluster AND sink = c.sink AND api_group = c.api_group
                        AND resource = c.resource AND scope = c.scope AND epoch = c.epoch) e ON true
  LEFT JOIN LATERAL (SELECT skipped FROM history_skipped
                      WHERE cluster = c.cluster AND sink = c.sink AND api_group = c.api_group
                        AND resource = c.resource AND scope = c.scope) h ON true
  LEFT JOIN (SELECT api_group, resource,
                    count(*) FILTER (WHERE deleted_at IS NULL)     AS live,
                    count(*) FILTER (WHERE deleted_at IS NOT NULL) AS deleted
               FROM objects WHERE cluster = @cluster
              GROUP BY api_group, resource) o USING (api_group, resource)
  LEFT JOIN (SELECT api_group, resource, count(*) AS quarantined
               FROM quarantine WHERE cluster = @cluster AND resolved_at IS NULL
              GROUP BY api_group, resource) q USING (api_group, resource)
 WHERE c.cluster = @cluster
 ORDER BY c.sink, c.api_group, c.resource, c.scope
