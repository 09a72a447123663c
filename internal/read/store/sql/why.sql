-- What changed before an object broke: why() (migration 019), the one definition; the
-- changes in (at - lookback, at] to the object, its controllers, the ConfigMaps and
-- Secrets it references, its node and the Services and Ingresses in front of it, each
-- with who made it. In observation order.
SELECT relation, depth, cluster, api_group, resource, namespace, name, change_id, observed_at, op, rv, uid,
       coalesce(changed, '{}') AS changed, coalesce(changed_by, '') AS changed_by,
       username, impersonator, user_agent, match
  FROM why(@resource, @namespace, @name, @at, @lookback, @cluster)
