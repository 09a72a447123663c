-- as_of()'s rows, every column as it comes, at most @limit (the web UI's table).
SELECT * FROM as_of(@at, @resource, @namespace, @cluster) LIMIT @limit
