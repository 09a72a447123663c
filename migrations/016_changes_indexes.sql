-- Fewer indexes on changes (docs/benchmarks.md, "What changes' indexes cost a write"):
-- by migration 015 every write into changes paid for ten indexes, and the relist batch of
-- issue 22 wrote at 0.80× the throughput of the unpartitioned table of migration 010.
-- This migration drops five of them (three that others serve, two whose filters another
-- serves at a cost) and builds none, so on any installation it takes milliseconds (DROP INDEX on the parent drops each partition's copy; it waits
-- for the ACCESS EXCLUSIVE lock on changes, i.e. for running reads and writes to end).
--
--   changes_cluster_observed_at (cluster, observed_at): a prefix of changes_feed
--     (cluster, observed_at, id), which serves every query it served (retention's
--     per-cluster month check, the UI's feed).
--   changes_key (cluster, api_group, resource, namespace, name, epoch, resource_version,
--     op): changes_key_observed (cluster, api_group, resource, namespace, name,
--     observed_at, id) has the same key prefix. history(), `kube-cdc history`, the UI's
--     object page read every row of one key and sort them by id: either index finds
--     them. The sink's replay guard (insertChangesSQL) asks whether the key has a row at
--     a given (epoch, RV, op): it now reads the key's rows through changes_key_observed
--     and checks those columns on the row, one key's versions at most, and only for the
--     rows the guard asks about (deletes, snapshot updates, rows at or below the objects
--     row's version).
--   changes_feed_name (cluster, name, observed_at, id): the UI's name filter reads
--     changes_key_observed instead, with name and observed_at as index conditions after
--     the key's leading columns (an index-only scan of the cluster's part of the
--     partitions in the range), or changes_feed as the namespace filter does.
--   changes_feed_namespace (cluster, namespace, observed_at, id) and
--   changes_feed_resource (cluster, api_group, resource, observed_at, id): the UI's
--     namespace and resource filters read changes_feed backwards from the range's end and
--     check the namespace or resource on each row until the page is full. A page costs
--     the rows up to its 51st match: at 10M rows over 40 namespaces that is ~2,000 rows
--     (docs/benchmarks.md); a namespace or resource with few changes in a long range reads
--     the whole range. Their two entries per row cost the relist batch ~12% of its
--     throughput, which issue 22's target does not leave (docs/benchmarks.md).
--
-- Left: changes_id (id), changes_key_observed, changes_feed, changes_feed_deletes (a
-- partial index: a row that is no delete costs it nothing) and the BRIN changes_observed_at.
DROP INDEX changes_cluster_observed_at;
DROP INDEX changes_key;
DROP INDEX IF EXISTS changes_feed_name;  -- made only by a development build of 015
DROP INDEX IF EXISTS changes_feed_namespace;  -- made only by a development build of 015
DROP INDEX IF EXISTS changes_feed_resource;  -- made only by a development build of 015

-- changed_paths (migration 005), the same paths, computed in PL/pgSQL: history() calls it
-- once per version, and the recursive CTE cost ~28 µs a call on the benchmark's ~1.2 KB
-- ConfigMaps (an executor started per call, a UNION of both sides' keys per object
-- walked into), most of history()'s time at 10M rows (docs/benchmarks.md). The walk is
-- the same: an object key or array index present on both sides is walked into when both
-- values are objects or both arrays; anything else that differs is a path; equal values
-- are skipped whole (one jsonb comparison). The keys of an object come from
-- jsonb_path_query_array on both sides merged, and the work list is in arrays, so nothing
-- runs a query but the final sort, and only when there are two paths or more.
CREATE OR REPLACE FUNCTION changed_paths(from_object jsonb, to_object jsonb) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    paths text[]  := ARRAY[''];          -- the work list: containers of one type that differ
    froms jsonb[] := ARRAY[from_object];
    tos   jsonb[] := ARRAY[to_object];
    found text[]  := '{}';
    t     text    := jsonb_typeof(from_object);
    n     int     := 1;
    a     jsonb;
    b     jsonb;
    va    jsonb;
    vb    jsonb;
    keys  jsonb;
    k     text;
    p     text;
BEGIN
    IF from_object IS NOT DISTINCT FROM to_object THEN
        RETURN '{}';
    END IF;
    IF t IS DISTINCT FROM jsonb_typeof(to_object) OR t NOT IN ('object', 'array') THEN
        RETURN ARRAY[''];
    END IF;
    WHILE n <= cardinality(paths) LOOP
        a := froms[n];
        b := tos[n];
        IF jsonb_typeof(a) = 'object' THEN
            keys := jsonb_path_query_array(a || b, '$.keyvalue().key');
            FOR i IN 0 .. jsonb_array_length(keys) - 1 LOOP
                k := keys ->> i;
                va := a -> k;
                vb := b -> k;
                CONTINUE WHEN va IS NOT DISTINCT FROM vb;
                p := paths[n] || '/' || replace(replace(k, '~', '~0'), '/', '~1');
                t := jsonb_typeof(va);
                IF t = jsonb_typeof(vb) AND t IN ('object', 'array') THEN
                    paths := paths || p;
                    froms := froms || va;
                    tos := tos || vb;
                ELSE
                    found := found || p;
                END IF;
            END LOOP;
        ELSE
            FOR i IN 0 .. greatest(jsonb_array_length(a), jsonb_array_length(b)) - 1 LOOP
                va := a -> i;
                vb := b -> i;
                CONTINUE WHEN va IS NOT DISTINCT FROM vb;
                p := paths[n] || '/' || i;
                t := jsonb_typeof(va);
                IF t = jsonb_typeof(vb) AND t IN ('object', 'array') THEN
                    paths := paths || p;
                    froms := froms || va;
                    tos := tos || vb;
                ELSE
                    found := found || p;
                END IF;
            END LOOP;
        END IF;
        n := n + 1;
    END LOOP;
    IF cardinality(found) < 2 THEN
        RETURN found;
    END IF;
    RETURN ARRAY(SELECT f FROM unnest(found) f ORDER BY f COLLATE "C");
END
$$;
