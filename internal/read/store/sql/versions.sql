-- The versions of one object of one cluster, each with the object it changed and its
-- actor: object_versions() (migration 020), the definition history() reads too.
SELECT id, observed_at, op, rv, uid, changed_by, inferred, coalesce(reason, '') AS reason, snapshot, epoch,
       object, previous, username, impersonator, user_agent, verb, subresource, audit_id, match,
       extract(epoch FROM distance)::float8 AS distance
  FROM object_versions(@resource, @namespace, @name, @cluster, @since)
