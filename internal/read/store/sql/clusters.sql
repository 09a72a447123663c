-- The clusters the schema holds checkpoints of.
SELECT DISTINCT cluster FROM checkpoints ORDER BY 1
