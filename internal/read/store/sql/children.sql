-- The objects a uid owns (the view owners), at most 200.
SELECT api_group, resource, kind, namespace, name
  FROM owners WHERE cluster = @cluster AND owner_uid = @uid
 ORDER BY kind, namespace, name LIMIT 200
