-- History at fleet scale (issue 22): `changes` becomes a table partitioned by month of
-- observed_at (PostgreSQL declarative partitioning), so retention drops whole months
-- instead of deleting rows, and a query bounded in time reads only the months it names.
-- docs/operations.md, "Partitioned history", is the runbook.
--
-- Layout after this migration:
--   changes               the partitioned parent: same name and columns as before
--   changes_YYYY_MM       one partition per calendar month (UTC), created ahead by the sink
--                         (changes_partitions_ensure) and dropped by retention
--   changes_default       the DEFAULT partition: stays empty; it exists so that no write
--                         can ever fail for lack of a partition (a clock far ahead, a sink
--                         that could not create the months ahead); the next
--                         changes_partition_create of that month moves its rows out
--   changes_legacy        only on an installation migrated with `kube-cdc migrate
--                         --partition-changes`: the old table, attached as one partition
--                         from MINVALUE to the month its CHECK constraint names
--
-- What changed for writers and readers:
--   - `id` is still unique and increasing (the same sequence, default on the parent), but
--     no longer a constraint: a UNIQUE index on a partitioned table must hold the
--     partition key. changes_id indexes it.
--   - changes_observed_at, a BRIN index on observed_at (rows arrive in time order, so a
--     summary per 128 pages serves "what changed in the last hour" at almost no cost to
--     writes: a btree on (namespace, observed_at) cost the relist write up to a fifth of
--     its throughput, docs/benchmarks.md).
--   - changes_once (UNIQUE on the change's key, epoch, RV and op) is gone for the same
--     reason, and observed_at differs when a batch is replayed, so it could not include
--     the partition key and still catch a replay. The sink's insert guards against
--     replays instead (internal/sinks/postgres/statements.go, insertChangesSQL); the
--     same columns are indexed, non-unique, by changes_key, which history() uses.
--
-- An existing `changes` of at most kube_cdc.partition_copy_limit rows (a setting, default
-- 100000) is copied into the partitioned table in this migration's transaction (seconds
-- at most). A larger one is not: copying it would hold an exclusive lock for minutes.
-- The migration then refuses, naming `kube-cdc migrate --partition-changes`, which
-- prepares the table online (a validated CHECK on observed_at and the partition's
-- indexes, built concurrently) and then applies this migration, which only renames the
-- table and attaches it as changes_legacy: no scan, no index build, milliseconds.

-- Each cluster's retention, recorded by its sinks (internal/sinks/postgres/retention.go):
-- a month's partition is dropped only when every cluster with rows in it keeps less than
-- its age; keep NULL is "forever".
CREATE TABLE retention (
    cluster    text        PRIMARY KEY,
    keep       interval,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- changes_partition_create(month) creates the partition of the calendar month (UTC) that
-- holds month and returns its name; NULL when it exists already or another partition
-- (changes_legacy) covers the month. Rows of that month in changes_default move into it.
-- The new table is filled first and then attached: ATTACH PARTITION takes a SHARE UPDATE
-- EXCLUSIVE lock on changes (writes go on) where CREATE TABLE … PARTITION OF would take
-- an ACCESS EXCLUSIVE one.
CREATE FUNCTION changes_partition_create(month timestamp) RETURNS text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    lo   timestamp := date_trunc('month', month);
    hi   timestamp := date_trunc('month', month) + interval '1 month';
    part text      := 'changes_' || to_char(date_trunc('month', month), 'YYYY_MM');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('kube-cdc partitions ' || current_schema()));
    IF to_regclass(quote_ident(part)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE changes INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
        EXECUTE format('WITH moved AS (DELETE FROM changes_default WHERE observed_at >= $1 AND observed_at < $2 RETURNING *)
                        INSERT INTO %I SELECT * FROM moved', part)
            USING lo AT TIME ZONE 'UTC', hi AT TIME ZONE 'UTC';
        EXECUTE format('ALTER TABLE changes ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       part, lo AT TIME ZONE 'UTC', hi AT TIME ZONE 'UTC');
    EXCEPTION WHEN invalid_object_definition THEN
        -- "would overlap partition changes_legacy": that partition holds the month.
        RETURN NULL;
    END;
    RETURN part;
END
$$;

-- changes_partitions_ensure(ahead) creates the partitions of this month and the `ahead`
-- months after it that are missing, and returns their names. The sink calls it at start
-- and every hour (partitions.ahead in its config, default 3).
CREATE FUNCTION changes_partitions_ensure(ahead int DEFAULT 3) RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    part text;
BEGIN
    FOR i IN 0..greatest(ahead, 0) LOOP
        part := changes_partition_create(date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => i));
        IF part IS NOT NULL THEN
            RETURN NEXT part;
        END IF;
    END LOOP;
END
$$;

DO $migrate$
DECLARE
    copy_limit bigint := coalesce(nullif(current_setting('kube_cdc.partition_copy_limit', true), '')::bigint, 100000);
    n          bigint;
    bound      text;
    cutover    timestamptz;
    first      timestamp;
    ix         text;
BEGIN
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM changes LIMIT %s) t', copy_limit + 1) INTO n;
    SELECT pg_get_constraintdef(c.oid) INTO bound
      FROM pg_constraint c
     WHERE c.conrelid = 'changes'::regclass AND c.conname = 'changes_partition_bound' AND c.convalidated;

    IF n > copy_limit AND bound IS NULL THEN
        RAISE EXCEPTION 'changes holds more than % rows: partitioning it in this migration would lock it for long. '
                        'Run `kube-cdc migrate --partition-changes` (docs/operations.md, "Partitioning an existing '
                        'changes table"): it prepares the table online, then applies this migration in milliseconds', copy_limit;
    END IF;

    -- Index names are per schema: the old table's give way to the parent's.
    ALTER TABLE changes RENAME TO changes_unpartitioned;
    ALTER INDEX changes_pkey RENAME TO changes_legacy_pkey;
    ALTER INDEX changes_once RENAME TO changes_legacy_once;
    ALTER INDEX changes_cluster_observed_at RENAME TO changes_legacy_cluster_observed_at;

    -- LIKE keeps every column (and any a later migration of another branch added before
    -- this one), their order, defaults (nextval of the same sequence) and CHECKs.
    CREATE TABLE changes (LIKE changes_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (observed_at);
    ALTER TABLE changes DROP CONSTRAINT IF EXISTS changes_partition_bound;
    ALTER SEQUENCE changes_id_seq OWNED BY changes.id;
    CREATE TABLE changes_default PARTITION OF changes DEFAULT;

    IF bound IS NOT NULL AND n > copy_limit THEN
        -- Prepared by `kube-cdc migrate --partition-changes`: every index the parent has
        -- exists on the old table already, valid, so ATTACH adopts them, and the
        -- validated CHECK proves the partition's bound, so ATTACH scans nothing.
        FOREACH ix IN ARRAY ARRAY['changes_legacy_id', 'changes_legacy_key', 'changes_legacy_cluster_observed_at',
                                  'changes_legacy_observed_at'] LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = to_regclass(quote_ident(ix)) AND i.indisvalid) THEN
                RAISE EXCEPTION 'index % is missing or invalid: run `kube-cdc migrate --partition-changes` again', ix;
            END IF;
        END LOOP;
        cutover := substring(bound FROM '''([^'']+)''')::timestamptz;
        ALTER TABLE changes_unpartitioned RENAME TO changes_legacy;
        ALTER TABLE changes_legacy ALTER COLUMN id DROP DEFAULT;
        CREATE INDEX changes_id ON changes (id);
        CREATE INDEX changes_key ON changes (cluster, api_group, resource, namespace, name, epoch, resource_version, op);
        CREATE INDEX changes_cluster_observed_at ON changes (cluster, observed_at);
        CREATE INDEX changes_observed_at ON changes USING brin (observed_at);
        EXECUTE format('ALTER TABLE changes ATTACH PARTITION changes_legacy FOR VALUES FROM (MINVALUE) TO (%L)', cutover);
        -- The old unique keys cost every write into changes_legacy until its bound and
        -- guards nothing the insert does not.
        ALTER TABLE changes_legacy DROP CONSTRAINT changes_legacy_once, DROP CONSTRAINT changes_legacy_pkey;
    ELSE
        -- Small: copy, ids and all, into monthly partitions from the oldest row's month.
        CREATE INDEX changes_id ON changes (id);
        CREATE INDEX changes_key ON changes (cluster, api_group, resource, namespace, name, epoch, resource_version, op);
        CREATE INDEX changes_cluster_observed_at ON changes (cluster, observed_at);
        CREATE INDEX changes_observed_at ON changes USING brin (observed_at);
        first := date_trunc('month', coalesce((SELECT min(observed_at) FROM changes_unpartitioned), now()) AT TIME ZONE 'UTC');
        WHILE first < date_trunc('month', now() AT TIME ZONE 'UTC') LOOP
            PERFORM changes_partition_create(first);
            first := first + interval '1 month';
        END LOOP;
        PERFORM changes_partitions_ensure(3);
        INSERT INTO changes SELECT * FROM changes_unpartitioned ORDER BY id;
        DROP TABLE changes_unpartitioned;
    END IF;
END
$migrate$;
