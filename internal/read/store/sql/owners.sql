-- An object's owners: the view owners (migration 013).
SELECT owner_api_group, owner_resource, owner_kind, owner_name, coalesce(controller, false)
  FROM owners
 WHERE cluster = @cluster AND api_group = @group AND resource = @resource AND namespace = @namespace AND name = @name
 ORDER BY owner_kind, owner_name
