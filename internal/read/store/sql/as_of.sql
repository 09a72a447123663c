-- The objects of a resource as observed at a moment: as_of() (migration 013), at most
-- @limit of them (NULL: all).
SELECT namespace, name, uid, rv, epoch, coalesce(change_id, 0) AS change_id, observed_at, snapshot, object
  FROM as_of(@at, @resource, @namespace, @cluster)
 LIMIT @limit::int
