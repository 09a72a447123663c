-- The unresolved quarantine rows of the cluster, at most @per of each resource.
SELECT api_group, resource, namespace, name, uid, resource_version, op, reason, sqlstate, quarantined_at
  FROM (SELECT *, row_number() OVER (PARTITION BY api_group, resource
                                    ORDER BY namespace, name, resource_version) AS n
          FROM quarantine WHERE cluster = @cluster AND resolved_at IS NULL) q
 WHERE n <= @per
 ORDER BY api_group, resource, namespace, name, resource_version
