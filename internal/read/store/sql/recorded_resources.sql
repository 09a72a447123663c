-- Every resource the schema keeps checkpoints of for the cluster (any sink), with the kind
-- of one of its objects ('' when it has none).
SELECT c.api_group, c.resource, coalesce(k.kind, '') AS kind
  FROM (SELECT DISTINCT api_group, resource FROM checkpoints WHERE cluster = @cluster) c
  LEFT JOIN LATERAL (SELECT kind FROM objects o
                      WHERE o.cluster = @cluster AND o.api_group = c.api_group AND o.resource = c.resource
                      LIMIT 1) k ON true
 ORDER BY 1, 2
