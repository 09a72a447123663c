-- Fails unless the role may read the tables every reader reads.
SELECT (SELECT 1 FROM objects LIMIT 0), (SELECT 1 FROM changes LIMIT 0),
       (SELECT 1 FROM checkpoints LIMIT 0), (SELECT 1 FROM quarantine LIMIT 0)
