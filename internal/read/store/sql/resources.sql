-- The resources a cluster has checkpoints of.
SELECT DISTINCT api_group, resource FROM checkpoints WHERE cluster = @cluster ORDER BY 2, 1
