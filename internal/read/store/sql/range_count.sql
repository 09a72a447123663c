-- The cluster's changes in [@from, @to) (@to NULL: no end), up to @limit: an index-only
-- count through changes_feed that stops at the limit.
SELECT count(*)::int FROM (
  SELECT 1 FROM changes
   WHERE cluster = @cluster AND observed_at >= @from AND (@to::timestamptz IS NULL OR observed_at < @to)
   LIMIT @limit) c
