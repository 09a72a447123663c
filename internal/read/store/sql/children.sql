-- The objects a uid owns, at most 200: those whose first owner reference names it
-- (objects_owner_first, migration 021), and those of the few with several owner
-- references that name it among the others (objects_owner_more). The same relation as
-- the view owners (migration 013), read by the owner's uid through an index instead of
-- through every live object's ownerReferences.
SELECT api_group, resource, kind, namespace, name
  FROM (SELECT o.api_group, o.resource, o.kind, o.namespace, o.name
          FROM objects o
         WHERE o.cluster = @cluster AND o.deleted_at IS NULL
           AND o.object #>> '{metadata,ownerReferences,0,uid}' = @uid
        UNION
        SELECT o.api_group, o.resource, o.kind, o.namespace, o.name
          FROM objects o
         WHERE o.cluster = @cluster AND o.deleted_at IS NULL
           AND o.object #> '{metadata,ownerReferences,1}' IS NOT NULL
           AND o.object #> '{metadata,ownerReferences}' @> jsonb_build_array(jsonb_build_object('uid', @uid::text))) c
 ORDER BY kind, namespace, name
 LIMIT 200
