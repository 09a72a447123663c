-- Drift checks (docs/architecture.md, "Drift checks, resync and resnapshot"): a row
-- edited behind kube-cdc's back (object changed, version not) is found by the next relist
-- (a resync, a resnapshot, a restart after 410) and rewritten, without keeping any digest in kube-cdc's memory. The upsert
-- records, for the object it writes:
--   object_xmin: the id of its transaction (txid_current() mod 2^32, which is what the
--     row's xmin says while nobody else has written the row since);
--   object_hash: jsonb_hash_extended(object, 0), a 64-bit hash of the jsonb's keys and
--     values (about 2 µs per 1.3 KB object, against 12 µs for md5(object::text), which
--     cost 9–13% of a relist's writes: docs/benchmarks.md, "Drift check").
-- The key index reads a row as drifted when another transaction wrote it last (xmin is
-- not object_xmin) and its object hashes differently: rows kube-cdc wrote last cost one
-- integer comparison; only rows someone else touched (a hand edit, a restore from a
-- logical dump, a batch written under savepoints) are hashed again.
-- NULL only where object is NULL (a row first seen as an inferred delete).
ALTER TABLE objects ADD COLUMN object_xmin bigint, ADD COLUMN object_hash bigint;

-- Rows written before this migration: taken as kube-cdc wrote them. A full pass over
-- objects, once.
UPDATE objects SET object_hash = jsonb_hash_extended(object, 0), object_xmin = txid_current() % 4294967296
 WHERE object IS NOT NULL;
