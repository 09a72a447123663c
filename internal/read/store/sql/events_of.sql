-- The Kubernetes Events (migration 019's events table) about the objects with these uids
-- in one cluster, seen last at or after @from and first before @to (@to NULL: no end),
-- newest first, at most @limit: the lanes view draws them on their object's lane, the
-- object page lists them beside its versions. Through events_involved (cluster,
-- involved_uid, last_at).
SELECT e.involved_uid, e.type, e.reason, e.message, e.count, coalesce(e.series_count, 0),
       coalesce(e.first_at, e.last_at, e.observed_at) AS first_at, coalesce(e.last_at, e.first_at, e.observed_at) AS last_at,
       e.reporting_component, e.deleted_at IS NOT NULL AS expired
  FROM events e
 WHERE e.cluster = @cluster AND e.involved_uid = ANY (@uids::text[])
   AND e.last_at >= @from AND (@to::timestamptz IS NULL OR coalesce(e.first_at, e.last_at) < @to)
 ORDER BY e.last_at DESC
 LIMIT @limit
