-- The objects a cluster-scoped uid owns (the view owners), at most 200: a cluster-scoped
-- owner's dependents may live in any namespace, so this reads every live object of the
-- cluster that names an owner (children.sql is the namespaced owner's read).
SELECT api_group, resource, kind, namespace, name
  FROM owners WHERE cluster = @cluster AND owner_uid = @uid
 ORDER BY kind, namespace, name LIMIT 200
