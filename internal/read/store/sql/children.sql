-- The objects a uid owns (the view owners), at most 200, in the owner's namespace.
-- Kubernetes refuses an owner reference across namespaces: a namespaced owner's dependents
-- live in its namespace, so the read scans that namespace's live objects (the primary
-- key's cluster and namespace columns) rather than every live object of the cluster; at
-- 10M changes rows that is 1,000 objects read instead of 40,000 (docs/benchmarks.md,
-- "History at scale"). No index on the owner's uid: it would cost every write of an owned
-- object (a pod's status update, the cluster's most frequent) an index entry.
SELECT api_group, resource, kind, namespace, name
  FROM owners WHERE cluster = @cluster AND namespace = @namespace AND owner_uid = @uid
 ORDER BY kind, namespace, name LIMIT 200
