-- The versions of one object of one cluster, each with the object it changed and its
-- actor: object_versions() (migration 020), the definition history() reads too.
--
-- previous is sent only where the row before it in this result does not hold it already:
-- most versions changed the version just before them, whose object the reader has (it is
-- the row before), so sending it again would double what crosses the wire and what the
-- reader decodes (History rebuilds it from previous_is_prior).
SELECT id, observed_at, op, rv, uid, changed_by, inferred, coalesce(reason, '') AS reason, snapshot, epoch, object,
       CASE WHEN previous_is_prior THEN NULL ELSE previous END AS previous, previous_is_prior,
       username, impersonator, user_agent, verb, subresource, audit_id, match,
       extract(epoch FROM distance)::float8 AS distance
  FROM (SELECT v.*, coalesce(v.previous = lag(v.object) OVER (ORDER BY v.id), false) AS previous_is_prior
          FROM object_versions(@resource, @namespace, @name, @cluster, @since) v) v
 ORDER BY id
