-- object_versions() reads an object's versions with a bitmap heap scan that asks for the
-- pages ahead of reading them (issue 29 item 3). One object's ~250 versions at 10M changes
-- rows lie on ~250 heap pages of 13 partitions; an index scan reads them one at a time,
-- each a wait for the disk when the page is cached nowhere. A bitmap heap scan with
-- effective_io_concurrency above 1 tells the kernel the pages it will read next
-- (posix_fadvise), and the disk reads them at once.
--
-- Measured on 10M rows (docs/benchmarks.md, "History at scale"), history() of 200 objects
-- after the OS cache was dropped and the server restarted: p50 25 ms, p99 40–42 ms with
-- the index scan; 14–17 ms, 21–27 ms with the bitmap scan and 64 pages ahead. From the OS
-- cache (nothing read from the disk) it costs ~1 ms more: p50 3.3–3.8 against 4.1–5.0 ms.
--
-- The versions are sorted by cluster and id for their window either way, so the index's
-- order is not needed. Both settings are the function's own (its SET clauses): no other
-- statement of the session sees them.
ALTER FUNCTION object_versions(text, text, text, text, timestamptz, boolean) SET enable_indexscan = off;

-- A server built without posix_fadvise (some non-Linux platforms) refuses any value but 0:
-- it keeps the default there, and a call of the function must not fail on it.
DO $$
BEGIN
    PERFORM set_config('effective_io_concurrency', '64', true);
    ALTER FUNCTION object_versions(text, text, text, text, timestamptz, boolean) SET effective_io_concurrency = 64;
EXCEPTION WHEN invalid_parameter_value THEN
    RAISE NOTICE 'effective_io_concurrency cannot be set on this server (%); object_versions() reads its pages one at a time', SQLERRM;
END
$$;
