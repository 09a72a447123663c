--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: kube_cdc; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA kube_cdc;


--
-- Name: abs_interval(interval); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.abs_interval(i interval) RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$ SELECT CASE WHEN $1 < interval '0' THEN -$1 ELSE $1 END $_$;


--
-- Name: as_of(timestamp with time zone, text, text, text); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.as_of(at timestamp with time zone, resource text, namespace text DEFAULT NULL::text, cluster text DEFAULT NULL::text) RETURNS TABLE(cluster text, namespace text, name text, uid text, rv bigint, epoch integer, change_id bigint, observed_at timestamp with time zone, op text, snapshot boolean, object jsonb)
    LANGUAGE sql STABLE
    SET search_path TO 'kube_cdc'
    SET jit TO 'off'
    AS $_$
WITH target AS (
    -- $2 is 'plural' or 'plural.group': the group is what follows the first dot.
    SELECT split_part($2, '.', 1) AS resource,
           CASE WHEN strpos($2, '.') > 0 THEN substr($2, strpos($2, '.') + 1) ELSE '' END AS api_group,
           -- An = ANY on the leading column of the indexes, as history() does. Every cluster
           -- that wrote objects has a checkpoint.
           CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k) ELSE ARRAY[$4] END AS clusters
), keys AS (
    -- Two branches, one of which a one-time filter switches off, so each uses the primary
    -- key as far as it can (an "$3 IS NULL OR namespace = $3" would not).
    SELECT o.cluster, o.api_group, o.resource, o.namespace, o.name, o.uid, o.resource_version, o.epoch,
           o.object, o.updated_at, o.deleted_at
      FROM target t JOIN objects o ON o.cluster = ANY (t.clusters) AND o.api_group = t.api_group AND o.resource = t.resource
     WHERE $3 IS NULL
    UNION ALL
    SELECT o.cluster, o.api_group, o.resource, o.namespace, o.name, o.uid, o.resource_version, o.epoch,
           o.object, o.updated_at, o.deleted_at
      FROM target t JOIN objects o ON o.cluster = ANY (t.clusters) AND o.api_group = t.api_group AND o.resource = t.resource
     WHERE $3 IS NOT NULL AND o.namespace = $3
)
SELECT k.cluster, k.namespace, k.name,
       coalesce(v.uid, k.uid), coalesce(v.resource_version, k.resource_version), coalesce(v.epoch, k.epoch),
       v.id, coalesce(v.observed_at, k.updated_at), coalesce(v.op, 'update'), coalesce(v.snapshot, false),
       coalesce(v.object, k.object)
  FROM keys k
  LEFT JOIN LATERAL (
        SELECT c.id, c.uid, c.resource_version, c.epoch, c.observed_at, c.op, c.snapshot, c.object
          FROM changes c
         WHERE c.cluster = k.cluster AND c.api_group = k.api_group AND c.resource = k.resource
           AND c.namespace = k.namespace AND c.name = k.name AND c.observed_at <= $1
         ORDER BY c.observed_at DESC, c.id DESC
         LIMIT 1) v ON true
 WHERE CASE WHEN v.id IS NOT NULL THEN v.op <> 'delete'
            -- No changes row at or before at: the objects row, if it has not changed since
            -- and no key's row has ever been written after at (retention took them all).
            ELSE k.deleted_at IS NULL AND k.object IS NOT NULL AND k.updated_at <= $1
                 AND NOT EXISTS (SELECT 1 FROM changes c
                                  WHERE c.cluster = k.cluster AND c.api_group = k.api_group AND c.resource = k.resource
                                    AND c.namespace = k.namespace AND c.name = k.name)
       END
 ORDER BY k.cluster, k.namespace, k.name
$_$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: audit_events; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.audit_events (
    audit_id text NOT NULL,
    cluster text NOT NULL,
    verb text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    subresource text DEFAULT ''::text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    object_uid text DEFAULT ''::text NOT NULL,
    response_rv bigint,
    response_uid text DEFAULT ''::text NOT NULL,
    deleted_uids text[] DEFAULT '{}'::text[] NOT NULL,
    username text NOT NULL,
    user_uid text DEFAULT ''::text NOT NULL,
    groups text[] DEFAULT '{}'::text[] NOT NULL,
    impersonator text,
    user_agent text DEFAULT ''::text NOT NULL,
    source_ips text[] DEFAULT '{}'::text[] NOT NULL,
    code integer NOT NULL,
    request_at timestamp with time zone NOT NULL,
    stage_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: changes; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes (
    id bigint NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
)
PARTITION BY RANGE (observed_at);


--
-- Name: epochs; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.epochs (
    cluster text NOT NULL,
    sink text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    scope text NOT NULL,
    epoch integer NOT NULL,
    reason text NOT NULL,
    checkpoint_rv bigint NOT NULL,
    list_rv bigint NOT NULL,
    namespace text,
    name text,
    held_rv bigint,
    detected_at timestamp with time zone NOT NULL,
    began_after timestamp with time zone
);


--
-- Name: change_actor(text, text, text, text, text, text, bigint, integer, text, boolean, boolean, timestamp with time zone); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.change_actor(p_cluster text, p_group text, p_resource text, p_namespace text, p_name text, p_uid text, p_rv bigint, p_epoch integer, p_op text, p_inferred boolean, p_deleting boolean, p_observed_at timestamp with time zone) RETURNS TABLE(username text, impersonator text, user_agent text, audit_id text, verb text, subresource text, match text, distance interval, user_uid text, groups text[], source_ips text[], request_at timestamp with time zone, rank integer)
    LANGUAGE sql STABLE
    BEGIN ATOMIC
 SELECT x.username,
     x.impersonator,
     x.user_agent,
     x.audit_id,
     x.verb,
     x.subresource,
     x.match,
     x.distance,
     x.user_uid,
     x.groups,
     x.source_ips,
     x.request_at,
     x.rank
    FROM (( SELECT e.username,
             e.impersonator,
             e.user_agent,
             e.audit_id,
             e.verb,
             e.subresource,
             'exact'::text AS match,
             NULL::interval AS distance,
             e.user_uid,
             e.groups,
             e.source_ips,
             e.request_at,
             0 AS rank
            FROM kube_cdc.audit_events e
           WHERE ((e.cluster = change_actor.p_cluster) AND (e.api_group = change_actor.p_group) AND (e.resource = change_actor.p_resource) AND (e.namespace = change_actor.p_namespace) AND (e.stage_at > COALESCE(( SELECT max(p.began_after) AS max
                    FROM kube_cdc.epochs p
                   WHERE ((change_actor.p_epoch > 0) AND (p.cluster = change_actor.p_cluster) AND (p.api_group = change_actor.p_group) AND (p.resource = change_actor.p_resource) AND (p.epoch = change_actor.p_epoch))), '-infinity'::timestamp with time zone)) AND (e.stage_at <= COALESCE(( SELECT min(p.began_after) AS min
                    FROM kube_cdc.epochs p
                   WHERE ((p.cluster = change_actor.p_cluster) AND (p.api_group = change_actor.p_group) AND (p.resource = change_actor.p_resource) AND (p.epoch = (change_actor.p_epoch + 1)))), 'infinity'::timestamp with time zone)) AND (((e.name = change_actor.p_name) AND (e.response_rv = change_actor.p_rv) AND (NOT change_actor.p_inferred)) OR ((change_actor.p_op = 'delete'::text) AND (e.name = change_actor.p_name) AND (e.verb = 'delete'::text) AND (e.response_rv IS NULL) AND (e.response_uid = change_actor.p_uid) AND (change_actor.p_uid <> ''::text)) OR ((change_actor.p_op = 'delete'::text) AND (e.name = ''::text) AND (e.verb = 'deletecollection'::text) AND (change_actor.p_uid = ANY (e.deleted_uids)))))
           ORDER BY e.request_at, e.audit_id
          LIMIT 1)
         UNION ALL
         ( SELECT e.username,
             e.impersonator,
             e.user_agent,
             e.audit_id,
             e.verb,
             e.subresource,
             'nearest'::text AS text,
             kube_cdc.abs_interval((e.stage_at - change_actor.p_observed_at)) AS abs_interval,
             e.user_uid,
             e.groups,
             e.source_ips,
             e.request_at,
             1
            FROM (( SELECT ub.prev_delete_at,
                     ub.next_delete_at,
                     ( SELECT d.request_at
                            FROM kube_cdc.audit_events d
                           WHERE ((d.cluster = change_actor.p_cluster) AND (d.api_group = change_actor.p_group) AND (d.resource = change_actor.p_resource) AND (d.namespace = change_actor.p_namespace) AND (d.name = change_actor.p_name) AND (d.verb = 'delete'::text) AND ((d.stage_at >= (ub.prev_delete_at - '00:01:00'::interval)) AND (d.stage_at <= (ub.prev_delete_at + '00:00:01'::interval))))
                           ORDER BY (kube_cdc.abs_interval((d.stage_at - ub.prev_delete_at)))
                          LIMIT 1) AS prev_delete_request_at,
                     ( SELECT d.stage_at
                            FROM kube_cdc.audit_events d
                           WHERE ((d.cluster = change_actor.p_cluster) AND (d.api_group = change_actor.p_group) AND (d.resource = change_actor.p_resource) AND (d.namespace = change_actor.p_namespace) AND (d.name = change_actor.p_name) AND (d.verb = 'delete'::text) AND ((d.stage_at >= (ub.next_delete_at - '00:01:00'::interval)) AND (d.stage_at <= (ub.next_delete_at + '00:00:01'::interval))))
                           ORDER BY (kube_cdc.abs_interval((d.stage_at - ub.next_delete_at)))
                          LIMIT 1) AS next_delete_stage_at
                    FROM ( SELECT ( SELECT o.observed_at
                                    FROM kube_cdc.changes o
                                   WHERE ((o.cluster = change_actor.p_cluster) AND (o.api_group = change_actor.p_group) AND (o.resource = change_actor.p_resource) AND (o.namespace = change_actor.p_namespace) AND (o.name = change_actor.p_name) AND (o.uid <> change_actor.p_uid) AND (o.op = 'delete'::text) AND (o.resource_version < change_actor.p_rv))
                                   ORDER BY o.resource_version DESC
                                  LIMIT 1) AS prev_delete_at,
                             ( SELECT o.observed_at
                                    FROM kube_cdc.changes o
                                   WHERE ((o.cluster = change_actor.p_cluster) AND (o.api_group = change_actor.p_group) AND (o.resource = change_actor.p_resource) AND (o.namespace = change_actor.p_namespace) AND (o.name = change_actor.p_name) AND (o.uid = change_actor.p_uid) AND (o.op = 'delete'::text) AND (o.resource_version > change_actor.p_rv))
                                   ORDER BY o.resource_version
                                  LIMIT 1) AS next_delete_at) ub) b
              JOIN kube_cdc.audit_events e ON (((e.cluster = change_actor.p_cluster) AND (e.api_group = change_actor.p_group) AND (e.resource = change_actor.p_resource) AND (e.namespace = change_actor.p_namespace) AND (e.name = change_actor.p_name))))
           WHERE (((e.stage_at >= (change_actor.p_observed_at - '00:01:00'::interval)) AND (e.stage_at <= (change_actor.p_observed_at + '00:01:00'::interval))) AND (e.stage_at > COALESCE(( SELECT max(p.began_after) AS max
                    FROM kube_cdc.epochs p
                   WHERE ((change_actor.p_epoch > 0) AND (p.cluster = change_actor.p_cluster) AND (p.api_group = change_actor.p_group) AND (p.resource = change_actor.p_resource) AND (p.epoch = change_actor.p_epoch))), '-infinity'::timestamp with time zone)) AND (e.stage_at <= COALESCE(( SELECT min(p.began_after) AS min
                    FROM kube_cdc.epochs p
                   WHERE ((p.cluster = change_actor.p_cluster) AND (p.api_group = change_actor.p_group) AND (p.resource = change_actor.p_resource) AND (p.epoch = (change_actor.p_epoch + 1)))), 'infinity'::timestamp with time zone)) AND
                 CASE change_actor.p_op
                     WHEN 'create'::text THEN ((e.verb = ANY (ARRAY['create'::text, 'update'::text, 'patch'::text])) AND (e.response_rv IS NULL))
                     WHEN 'update'::text THEN (((e.verb = ANY (ARRAY['update'::text, 'patch'::text])) AND (e.response_rv IS NULL)) OR ((e.verb = 'delete'::text) AND ((e.response_rv IS NULL) OR (e.response_rv > change_actor.p_rv)) AND change_actor.p_deleting))
                     ELSE ((e.verb = 'delete'::text) AND (e.response_rv IS NULL) AND (e.response_uid = ''::text))
                 END AND (e.object_uid = ANY (ARRAY[''::text, change_actor.p_uid])) AND (e.response_uid = ANY (ARRAY[''::text, change_actor.p_uid])) AND ((b.prev_delete_at IS NULL) OR
                 CASE
                     WHEN (b.prev_delete_request_at IS NOT NULL) THEN (e.request_at >= b.prev_delete_request_at)
                     ELSE (e.stage_at > b.prev_delete_at)
                 END) AND ((b.next_delete_at IS NULL) OR (e.verb = 'delete'::text) OR
                 CASE
                     WHEN (b.next_delete_stage_at IS NOT NULL) THEN (e.request_at < b.next_delete_stage_at)
                     ELSE (e.request_at < b.next_delete_at)
                 END) AND (EXISTS ( SELECT 1
                    FROM kube_cdc.audit_events g
                   WHERE ((g.cluster = change_actor.p_cluster) AND (g.api_group = change_actor.p_group) AND (g.resource = change_actor.p_resource) AND (g.namespace = change_actor.p_namespace) AND (g.name = change_actor.p_name) AND ((g.stage_at >= (change_actor.p_observed_at - '00:01:00'::interval)) AND (g.stage_at <= (change_actor.p_observed_at + '00:01:00'::interval)))))))
           ORDER BY
                 CASE change_actor.p_op
                     WHEN 'create'::text THEN (e.verb <> 'create'::text)
                     WHEN 'update'::text THEN (e.verb = 'delete'::text)
                     ELSE false
                 END, (kube_cdc.abs_interval((e.stage_at - change_actor.p_observed_at))), e.audit_id
          LIMIT 1)) x
  LIMIT 1;
END;


--
-- Name: changed_paths(jsonb, jsonb); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.changed_paths(from_object jsonb, to_object jsonb) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
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
$_$;


--
-- Name: changes_partition_create(timestamp without time zone); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.changes_partition_create(month timestamp without time zone) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'kube_cdc'
    AS $_$
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
$_$;


--
-- Name: changes_partitions_ensure(integer); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.changes_partitions_ensure(ahead integer DEFAULT 3) RETURNS SETOF text
    LANGUAGE plpgsql
    SET search_path TO 'kube_cdc'
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


--
-- Name: epochs_began_after(); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.epochs_began_after() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'kube_cdc'
    AS $$
BEGIN
    IF NEW.began_after IS NULL THEN
        NEW.began_after := least(NEW.detected_at,
            (SELECT max(c.observed_at) FROM changes c
              WHERE c.cluster = NEW.cluster AND c.api_group = NEW.api_group AND c.resource = NEW.resource
                AND c.epoch < NEW.epoch));
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: history(text, text, text, text); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.history(resource text, namespace text, name text, cluster text DEFAULT NULL::text) RETURNS TABLE(id bigint, cluster text, observed_at timestamp with time zone, op text, rv bigint, uid text, changed_by text, inferred boolean, reason text, snapshot boolean, changed text[], username text, impersonator text, user_agent text, match text)
    LANGUAGE sql STABLE
    SET search_path TO 'kube_cdc'
    AS $_$ SELECT * FROM history_rows($1, $2, $3, $4) $_$;


--
-- Name: history_rows(text, text, text, text); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.history_rows(p_resource text, p_namespace text, p_name text, p_cluster text) RETURNS TABLE(id bigint, cluster text, observed_at timestamp with time zone, op text, rv bigint, uid text, changed_by text, inferred boolean, reason text, snapshot boolean, changed text[], username text, impersonator text, user_agent text, match text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'kube_cdc'
    SET plan_cache_mode TO 'force_generic_plan'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_resource text := split_part(p_resource, '.', 1);
    v_group    text := CASE WHEN strpos(p_resource, '.') > 0 THEN substr(p_resource, strpos(p_resource, '.') + 1) ELSE '' END;
    v_clusters text[];
    v_audited  text[];
BEGIN
    v_clusters := CASE WHEN p_cluster IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                       ELSE ARRAY[p_cluster] END;
    -- The clusters with an audit event of the key (or a deletecollection in its
    -- namespace): only their versions look their actor up. Where audit events are not
    -- received (most objects, most clusters) that lookup cost ~10-15 µs a version, a
    -- third of history().
    v_audited := ARRAY(SELECT k FROM unnest(v_clusters) k
                        WHERE EXISTS (SELECT 1 FROM audit_events e
                                       WHERE e.cluster = k AND e.api_group = v_group AND e.resource = v_resource
                                         AND e.namespace = p_namespace AND e.name IN (p_name, '')));
    RETURN QUERY
    SELECT h.id, h.cluster, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, h.reason,
           h.snapshot,
           CASE WHEN h.object IS NOT NULL
                THEN array_remove(coalesce(h.changed, changed_paths(coalesce(h.previous, '{}'), h.object)),
                                  '/metadata/resourceVersion')
           END,
           a.username, a.impersonator, a.user_agent, a.match
      FROM (SELECT c.id, c.cluster, c.api_group, c.resource, c.namespace, c.name, c.observed_at, c.op,
                   c.resource_version, c.epoch, c.uid, c.changed_by, c.inferred, c.reason, c.snapshot, c.object,
                   c.changed,
                   -- Only where changed is not stored: the object of the row before.
                   CASE WHEN c.changed IS NULL AND lag(c.op) OVER w <> 'delete'
                             AND (lag(c.uid) OVER w = c.uid OR '' IN (c.uid, lag(c.uid) OVER w))
                        THEN lag(c.object) OVER w END AS previous
              FROM changes c
             WHERE c.resource = v_resource AND c.api_group = v_group
               AND c.namespace = p_namespace AND c.name = p_name
               AND c.cluster = ANY (v_clusters)
            WINDOW w AS (PARTITION BY c.cluster ORDER BY c.id)) h
      -- Each version's actor from its own columns (change_actor, as the view change_actors
      -- defines it), without reading the change again.
      LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.user_agent, x.match
                           FROM change_actor(h.cluster, h.api_group, h.resource, h.namespace, h.name, h.uid,
                                             h.resource_version, h.epoch, h.op, h.inferred,
                                             h.object -> 'metadata' ? 'deletionTimestamp', h.observed_at) x
                          WHERE h.cluster = ANY (v_audited)
                         -- A fence: kept in the subquery, the condition is a one-time filter
                         -- of each lookup; pulled up, it became the join's filter, tested
                         -- after the lookup ran.
                         OFFSET 0) a ON true
     ORDER BY h.id;
END
$$;


--
-- Name: lineage(text, text, text, text); Type: FUNCTION; Schema: kube_cdc; Owner: -
--

CREATE FUNCTION kube_cdc.lineage(resource text, namespace text, name text, cluster text DEFAULT NULL::text) RETURNS TABLE(depth integer, cluster text, api_group text, resource text, kind text, namespace text, name text, uid text, found boolean)
    LANGUAGE sql STABLE
    SET search_path TO 'kube_cdc'
    AS $_$
WITH RECURSIVE chain AS (
    SELECT 0 AS depth, o.cluster, o.api_group, o.resource, o.kind, o.namespace, o.name, o.uid, o.object, true AS found
      FROM objects o
     WHERE o.resource = split_part($1, '.', 1)
       AND o.api_group = CASE WHEN strpos($1, '.') > 0 THEN substr($1, strpos($1, '.') + 1) ELSE '' END
       AND o.namespace = $2 AND o.name = $3 AND o.deleted_at IS NULL
       AND o.cluster = ANY (CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                                 ELSE ARRAY[$4] END)
  UNION ALL
    SELECT c.depth + 1, c.cluster,
           coalesce(p.api_group, CASE WHEN strpos(ref.r ->> 'apiVersion', '/') > 0
                                      THEN split_part(ref.r ->> 'apiVersion', '/', 1) ELSE '' END),
           p.resource, ref.r ->> 'kind', p.namespace, ref.r ->> 'name', ref.r ->> 'uid', p.object, p.uid IS NOT NULL
      FROM chain c
     CROSS JOIN LATERAL (SELECT r FROM jsonb_array_elements(c.object #> '{metadata,ownerReferences}') AS e(r)
                          WHERE (r ->> 'controller')::boolean
                          LIMIT 1) AS ref(r)
      LEFT JOIN objects p ON p.cluster = c.cluster AND p.uid = ref.r ->> 'uid' AND p.deleted_at IS NULL
                         AND p.namespace IN (c.namespace, '') AND p.kind = ref.r ->> 'kind'
     WHERE c.depth < 32 AND jsonb_typeof(c.object #> '{metadata,ownerReferences}') = 'array'
)
SELECT depth, cluster, api_group, resource, kind, namespace, name, uid, found
  FROM chain
 ORDER BY cluster, depth
$_$;


--
-- Name: audit_log_positions; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.audit_log_positions (
    cluster text NOT NULL,
    reader text NOT NULL,
    path text NOT NULL,
    inode bigint NOT NULL,
    "offset" bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: change_actors; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.change_actors AS
 SELECT c.id AS change_id,
    c.cluster,
    a.username,
    a.impersonator,
    a.user_agent,
    a.audit_id,
    a.verb,
    a.subresource,
    a.match,
    a.distance,
    a.user_uid,
    a.groups,
    a.source_ips,
    a.request_at,
    c.observed_at AS change_observed_at
   FROM (kube_cdc.changes c
     CROSS JOIN LATERAL kube_cdc.change_actor(c.cluster, c.api_group, c.resource, c.namespace, c.name, c.uid, c.resource_version, c.epoch, c.op, c.inferred, ((c.object -> 'metadata'::text) ? 'deletionTimestamp'::text), c.observed_at) a(username, impersonator, user_agent, audit_id, verb, subresource, match, distance, user_uid, groups, source_ips, request_at, rank));


--
-- Name: changes_id_seq; Type: SEQUENCE; Schema: kube_cdc; Owner: -
--

CREATE SEQUENCE kube_cdc.changes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: changes_id_seq; Type: SEQUENCE OWNED BY; Schema: kube_cdc; Owner: -
--

ALTER SEQUENCE kube_cdc.changes_id_seq OWNED BY kube_cdc.changes.id;


--
-- Name: changes_2026_11; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes_2026_11 (
    id bigint DEFAULT nextval('kube_cdc.changes_id_seq'::regclass) NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
);


--
-- Name: changes_2026_12; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes_2026_12 (
    id bigint DEFAULT nextval('kube_cdc.changes_id_seq'::regclass) NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
);


--
-- Name: changes_2027_01; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes_2027_01 (
    id bigint DEFAULT nextval('kube_cdc.changes_id_seq'::regclass) NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
);


--
-- Name: changes_2027_02; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes_2027_02 (
    id bigint DEFAULT nextval('kube_cdc.changes_id_seq'::regclass) NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
);


--
-- Name: changes_default; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.changes_default (
    id bigint DEFAULT nextval('kube_cdc.changes_id_seq'::regclass) NOT NULL,
    cluster text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text,
    epoch integer DEFAULT 0 NOT NULL,
    changed text[],
    CONSTRAINT changes_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text])))
);


--
-- Name: checkpoints; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.checkpoints (
    cluster text NOT NULL,
    sink text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    scope text DEFAULT ''::text NOT NULL,
    resource_version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    epoch integer DEFAULT 0 NOT NULL,
    cluster_uid text DEFAULT ''::text NOT NULL
);


--
-- Name: objects; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.objects (
    cluster text NOT NULL,
    api_group text NOT NULL,
    api_version text NOT NULL,
    resource text NOT NULL,
    kind text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    object jsonb,
    changed_by text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    delete_inferred boolean DEFAULT false NOT NULL,
    delete_reason text,
    epoch integer DEFAULT 0 NOT NULL,
    object_xmin bigint,
    object_hash bigint,
    in_changes boolean DEFAULT true NOT NULL
);


--
-- Name: deployments; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.deployments AS
 SELECT objects.cluster,
    objects.namespace,
    objects.name,
    objects.uid,
    ((objects.object #>> '{spec,replicas}'::text[]))::integer AS replicas,
    COALESCE(((objects.object #>> '{status,readyReplicas}'::text[]))::integer, 0) AS ready_replicas,
    COALESCE(((objects.object #>> '{status,updatedReplicas}'::text[]))::integer, 0) AS updated_replicas,
    COALESCE(((objects.object #>> '{status,availableReplicas}'::text[]))::integer, 0) AS available_replicas,
    ARRAY( SELECT (e.c ->> 'image'::text)
           FROM jsonb_array_elements((objects.object #> '{spec,template,spec,containers}'::text[])) WITH ORDINALITY e(c, i)
          ORDER BY e.i) AS images,
    (objects.object #>> '{spec,strategy,type}'::text[]) AS strategy,
    objects.labels,
    ((objects.object #>> '{metadata,creationTimestamp}'::text[]))::timestamp with time zone AS creation_timestamp,
    objects.resource_version,
    objects.updated_at
   FROM kube_cdc.objects
  WHERE ((objects.api_group = 'apps'::text) AND (objects.resource = 'deployments'::text) AND (objects.deleted_at IS NULL));


--
-- Name: history_skipped; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.history_skipped (
    cluster text NOT NULL,
    sink text NOT NULL,
    api_group text NOT NULL,
    resource text NOT NULL,
    scope text NOT NULL,
    skipped bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: ingress_routes; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.ingress_routes AS
 SELECT i.cluster,
    i.namespace,
    i.name AS ingress,
    i.uid AS ingress_uid,
    COALESCE((i.object #>> '{spec,ingressClassName}'::text[]), (i.object #>> '{metadata,annotations,kubernetes.io/ingress.class}'::text[])) AS ingress_class,
    r.host,
    r.path,
    r.path_type,
    r.default_backend,
    (r.backend #>> '{service,name}'::text[]) AS service,
    COALESCE((r.backend #>> '{service,port,number}'::text[]), (r.backend #>> '{service,port,name}'::text[])) AS service_port,
    s.uid AS service_uid
   FROM ((kube_cdc.objects i
     CROSS JOIN LATERAL ( SELECT (rl.rule ->> 'host'::text) AS "?column?",
            (ps.p ->> 'path'::text) AS "?column?",
            (ps.p ->> 'pathType'::text) AS "?column?",
            false AS "?column?",
            (ps.p -> 'backend'::text) AS "?column?"
           FROM (jsonb_array_elements(
                CASE
                    WHEN (jsonb_typeof((i.object #> '{spec,rules}'::text[])) = 'array'::text) THEN (i.object #> '{spec,rules}'::text[])
                    ELSE '[]'::jsonb
                END) rl(rule)
             CROSS JOIN LATERAL jsonb_array_elements(
                CASE
                    WHEN (jsonb_typeof((rl.rule #> '{http,paths}'::text[])) = 'array'::text) THEN (rl.rule #> '{http,paths}'::text[])
                    ELSE '[]'::jsonb
                END) ps(p))
        UNION ALL
         SELECT NULL::text,
            NULL::text,
            NULL::text,
            true,
            (i.object #> '{spec,defaultBackend}'::text[])
          WHERE (jsonb_typeof((i.object #> '{spec,defaultBackend}'::text[])) = 'object'::text)) r(host, path, path_type, default_backend, backend))
     LEFT JOIN kube_cdc.objects s ON (((s.cluster = i.cluster) AND (s.api_group = ''::text) AND (s.resource = 'services'::text) AND (s.namespace = i.namespace) AND (s.name = (r.backend #>> '{service,name}'::text[])) AND (s.deleted_at IS NULL))))
  WHERE ((i.api_group = 'networking.k8s.io'::text) AND (i.resource = 'ingresses'::text) AND (i.deleted_at IS NULL));


--
-- Name: nodes; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.nodes AS
 SELECT objects.cluster,
    objects.name,
    objects.uid,
    (objects.object #>> '{status,nodeInfo,kubeletVersion}'::text[]) AS kubelet_version,
    ( SELECT ((c.value ->> 'status'::text) = 'True'::text)
           FROM jsonb_array_elements((objects.object #> '{status,conditions}'::text[])) c(value)
          WHERE ((c.value ->> 'type'::text) = 'Ready'::text)
         LIMIT 1) AS ready,
    COALESCE(((objects.object #>> '{spec,unschedulable}'::text[]))::boolean, false) AS unschedulable,
    (objects.object #>> '{status,capacity,cpu}'::text[]) AS cpu_capacity,
    (objects.object #>> '{status,capacity,memory}'::text[]) AS memory_capacity,
    (objects.object #>> '{status,capacity,pods}'::text[]) AS pods_capacity,
    (objects.object #>> '{status,allocatable,cpu}'::text[]) AS cpu_allocatable,
    (objects.object #>> '{status,allocatable,memory}'::text[]) AS memory_allocatable,
    ( SELECT (a.value ->> 'address'::text)
           FROM jsonb_array_elements((objects.object #> '{status,addresses}'::text[])) a(value)
          WHERE ((a.value ->> 'type'::text) = 'InternalIP'::text)
         LIMIT 1) AS internal_ip,
    (objects.object #>> '{status,nodeInfo,osImage}'::text[]) AS os_image,
    (objects.object #>> '{status,nodeInfo,kernelVersion}'::text[]) AS kernel_version,
    (objects.object #>> '{status,nodeInfo,containerRuntimeVersion}'::text[]) AS container_runtime,
    (objects.object #>> '{status,nodeInfo,architecture}'::text[]) AS architecture,
    objects.labels,
    ((objects.object #>> '{metadata,creationTimestamp}'::text[]))::timestamp with time zone AS creation_timestamp,
    objects.resource_version,
    objects.updated_at
   FROM kube_cdc.objects
  WHERE ((objects.api_group = ''::text) AND (objects.resource = 'nodes'::text) AND (objects.deleted_at IS NULL));


--
-- Name: owners; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.owners AS
 SELECT o.cluster,
    o.api_group,
    o.resource,
    o.kind,
    o.namespace,
    o.name,
    o.uid,
    ref.api_group AS owner_api_group,
    (ref.r ->> 'apiVersion'::text) AS owner_api_version,
    (ref.r ->> 'kind'::text) AS owner_kind,
    p.resource AS owner_resource,
    p.namespace AS owner_namespace,
    (ref.r ->> 'name'::text) AS owner_name,
    (ref.r ->> 'uid'::text) AS owner_uid,
    COALESCE(((ref.r ->> 'controller'::text))::boolean, false) AS controller,
    COALESCE(((ref.r ->> 'blockOwnerDeletion'::text))::boolean, false) AS block_owner_deletion
   FROM ((kube_cdc.objects o
     CROSS JOIN LATERAL ( SELECT e.r,
                CASE
                    WHEN (strpos((e.r ->> 'apiVersion'::text), '/'::text) > 0) THEN split_part((e.r ->> 'apiVersion'::text), '/'::text, 1)
                    ELSE ''::text
                END AS "case"
           FROM jsonb_array_elements((o.object #> '{metadata,ownerReferences}'::text[])) e(r)) ref(r, api_group))
     LEFT JOIN kube_cdc.objects p ON (((p.cluster = o.cluster) AND (p.uid = (ref.r ->> 'uid'::text)) AND (p.deleted_at IS NULL) AND ((p.namespace = o.namespace) OR (p.namespace = ''::text)) AND (p.api_group = ref.api_group) AND (p.kind = (ref.r ->> 'kind'::text)))))
  WHERE ((o.deleted_at IS NULL) AND (jsonb_typeof((o.object #> '{metadata,ownerReferences}'::text[])) = 'array'::text));


--
-- Name: pod_placement; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.pod_placement AS
 SELECT p.cluster,
    p.namespace,
    p.name AS pod,
    p.uid AS pod_uid,
    (p.object #>> '{spec,nodeName}'::text[]) AS node,
    n.uid AS node_uid,
    (p.object #>> '{status,phase}'::text[]) AS phase,
    (p.object #>> '{status,podIP}'::text[]) AS pod_ip,
    (p.object #>> '{status,hostIP}'::text[]) AS host_ip
   FROM (kube_cdc.objects p
     LEFT JOIN kube_cdc.objects n ON (((n.cluster = p.cluster) AND (n.api_group = ''::text) AND (n.resource = 'nodes'::text) AND (n.namespace = ''::text) AND (n.name = (p.object #>> '{spec,nodeName}'::text[])) AND (n.deleted_at IS NULL))))
  WHERE ((p.api_group = ''::text) AND (p.resource = 'pods'::text) AND (p.deleted_at IS NULL));


--
-- Name: pod_storage; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.pod_storage AS
 SELECT p.cluster,
    p.namespace,
    p.name AS pod,
    p.uid AS pod_uid,
    (v.vol ->> 'name'::text) AS volume,
    v.claim,
    (v.vol ? 'ephemeral'::text) AS ephemeral,
    (((v.vol #>> '{persistentVolumeClaim,readOnly}'::text[]))::boolean IS TRUE) AS read_only,
    c.uid AS claim_uid,
    (c.object #>> '{status,phase}'::text[]) AS claim_phase,
    (c.object #>> '{spec,volumeName}'::text[]) AS persistent_volume,
    pv.uid AS persistent_volume_uid,
    COALESCE((pv.object #>> '{spec,storageClassName}'::text[]), (c.object #>> '{spec,storageClassName}'::text[])) AS storage_class,
    sc.uid AS storage_class_uid,
    (sc.object ->> 'provisioner'::text) AS provisioner
   FROM ((((kube_cdc.objects p
     CROSS JOIN LATERAL ( SELECT e.vol,
            COALESCE((e.vol #>> '{persistentVolumeClaim,claimName}'::text[]), ((p.name || '-'::text) || (e.vol ->> 'name'::text))) AS "coalesce"
           FROM jsonb_array_elements((p.object #> '{spec,volumes}'::text[])) e(vol)
          WHERE ((e.vol ? 'persistentVolumeClaim'::text) OR (e.vol ? 'ephemeral'::text))) v(vol, claim))
     LEFT JOIN kube_cdc.objects c ON (((c.cluster = p.cluster) AND (c.api_group = ''::text) AND (c.resource = 'persistentvolumeclaims'::text) AND (c.namespace = p.namespace) AND (c.name = v.claim) AND (c.deleted_at IS NULL))))
     LEFT JOIN kube_cdc.objects pv ON (((pv.cluster = p.cluster) AND (pv.api_group = ''::text) AND (pv.resource = 'persistentvolumes'::text) AND (pv.namespace = ''::text) AND (pv.name = (c.object #>> '{spec,volumeName}'::text[])) AND (pv.deleted_at IS NULL))))
     LEFT JOIN kube_cdc.objects sc ON (((sc.cluster = p.cluster) AND (sc.api_group = 'storage.k8s.io'::text) AND (sc.resource = 'storageclasses'::text) AND (sc.namespace = ''::text) AND (sc.name = COALESCE((pv.object #>> '{spec,storageClassName}'::text[]), (c.object #>> '{spec,storageClassName}'::text[]))) AND (sc.deleted_at IS NULL))))
  WHERE ((p.api_group = ''::text) AND (p.resource = 'pods'::text) AND (p.deleted_at IS NULL) AND (jsonb_typeof((p.object #> '{spec,volumes}'::text[])) = 'array'::text));


--
-- Name: pods; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.pods AS
 SELECT objects.cluster,
    objects.namespace,
    objects.name,
    objects.uid,
    (objects.object #>> '{spec,nodeName}'::text[]) AS node,
    (objects.object #>> '{status,phase}'::text[]) AS phase,
    (objects.object #>> '{status,podIP}'::text[]) AS pod_ip,
    (objects.object #>> '{status,hostIP}'::text[]) AS host_ip,
    (objects.object #>> '{spec,serviceAccountName}'::text[]) AS service_account,
    ARRAY( SELECT (e.c ->> 'image'::text)
           FROM jsonb_array_elements((objects.object #> '{spec,containers}'::text[])) WITH ORDINALITY e(c, i)
          ORDER BY e.i) AS images,
    (( SELECT COALESCE(sum(((s.value ->> 'restartCount'::text))::integer), (0)::bigint) AS "coalesce"
           FROM jsonb_array_elements((objects.object #> '{status,containerStatuses}'::text[])) s(value)))::integer AS restarts,
    (objects.object #>> '{metadata,ownerReferences,0,kind}'::text[]) AS owner_kind,
    (objects.object #>> '{metadata,ownerReferences,0,name}'::text[]) AS owner_name,
    objects.labels,
    ((objects.object #>> '{metadata,creationTimestamp}'::text[]))::timestamp with time zone AS creation_timestamp,
    objects.resource_version,
    objects.updated_at
   FROM kube_cdc.objects
  WHERE ((objects.api_group = ''::text) AND (objects.resource = 'pods'::text) AND (objects.deleted_at IS NULL));


--
-- Name: quarantine; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.quarantine (
    cluster text NOT NULL,
    api_group text NOT NULL,
    api_version text NOT NULL,
    resource text NOT NULL,
    kind text NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    uid text NOT NULL,
    resource_version bigint NOT NULL,
    op text NOT NULL,
    inferred boolean DEFAULT false NOT NULL,
    snapshot boolean DEFAULT false NOT NULL,
    changed_by text DEFAULT ''::text NOT NULL,
    observed_at timestamp with time zone NOT NULL,
    reason text NOT NULL,
    sqlstate text NOT NULL,
    raw bytea,
    quarantined_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    resolved_rv bigint,
    epoch integer DEFAULT 0 NOT NULL
);


--
-- Name: resolved; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.resolved AS
 SELECT checkpoints.cluster,
    checkpoints.sink,
    checkpoints.api_group,
    checkpoints.resource,
    checkpoints.scope,
    checkpoints.epoch,
    checkpoints.resource_version AS resolved_rv,
    checkpoints.updated_at AS resolved_at
   FROM kube_cdc.checkpoints;


--
-- Name: resolved_resources; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.resolved_resources AS
 SELECT per_resource.cluster,
    per_resource.sink,
    per_resource.api_group,
    per_resource.resource,
    (per_resource.lowest[1])::integer AS epoch,
    per_resource.lowest[2] AS resolved_rv,
    per_resource.resolved_at,
    per_resource.scopes
   FROM ( SELECT checkpoints.cluster,
            checkpoints.sink,
            checkpoints.api_group,
            checkpoints.resource,
            min(ARRAY[(checkpoints.epoch)::bigint, checkpoints.resource_version]) AS lowest,
            max(checkpoints.updated_at) AS resolved_at,
            count(*) AS scopes
           FROM kube_cdc.checkpoints
          GROUP BY checkpoints.cluster, checkpoints.sink, checkpoints.api_group, checkpoints.resource) per_resource;


--
-- Name: retention; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.retention (
    cluster text NOT NULL,
    keep interval,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: kube_cdc; Owner: -
--

CREATE TABLE kube_cdc.schema_migrations (
    version text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: service_backends; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.service_backends AS
 SELECT s.cluster,
    s.namespace,
    s.name AS service,
    s.uid AS service_uid,
    e.name AS endpointslice,
    e.uid AS endpointslice_uid,
    (e.object ->> 'addressType'::text) AS address_type,
    (ep.ep #>> '{addresses,0}'::text[]) AS address,
        CASE
            WHEN (ep.ep IS NOT NULL) THEN COALESCE(((ep.ep #>> '{conditions,ready}'::text[]))::boolean, true)
            ELSE NULL::boolean
        END AS ready,
    (ep.ep ->> 'nodeName'::text) AS node,
    (ep.ep #>> '{targetRef,kind}'::text[]) AS target_kind,
    (ep.ep #>> '{targetRef,name}'::text[]) AS target_name,
    p.name AS pod,
    p.uid AS pod_uid
   FROM (((kube_cdc.objects s
     LEFT JOIN kube_cdc.objects e ON (((e.cluster = s.cluster) AND (e.api_group = 'discovery.k8s.io'::text) AND (e.resource = 'endpointslices'::text) AND (e.namespace = s.namespace) AND ((e.labels ->> 'kubernetes.io/service-name'::text) = s.name) AND (e.deleted_at IS NULL))))
     LEFT JOIN LATERAL jsonb_array_elements(
        CASE
            WHEN (jsonb_typeof((e.object -> 'endpoints'::text)) = 'array'::text) THEN (e.object -> 'endpoints'::text)
            ELSE NULL::jsonb
        END) ep(ep) ON (true))
     LEFT JOIN kube_cdc.objects p ON (((p.cluster = s.cluster) AND (p.api_group = ''::text) AND (p.resource = 'pods'::text) AND ((ep.ep #>> '{targetRef,kind}'::text[]) = 'Pod'::text) AND (p.namespace = COALESCE((ep.ep #>> '{targetRef,namespace}'::text[]), s.namespace)) AND (p.name = (ep.ep #>> '{targetRef,name}'::text[])) AND (p.uid = (ep.ep #>> '{targetRef,uid}'::text[])) AND (p.deleted_at IS NULL))))
  WHERE ((s.api_group = ''::text) AND (s.resource = 'services'::text) AND (s.deleted_at IS NULL));


--
-- Name: services; Type: VIEW; Schema: kube_cdc; Owner: -
--

CREATE VIEW kube_cdc.services AS
 SELECT objects.cluster,
    objects.namespace,
    objects.name,
    objects.uid,
    COALESCE((objects.object #>> '{spec,type}'::text[]), 'ClusterIP'::text) AS type,
    (objects.object #>> '{spec,clusterIP}'::text[]) AS cluster_ip,
    ARRAY( SELECT ((((e.p ->> 'port'::text) || COALESCE((':'::text || (e.p ->> 'nodePort'::text)), ''::text)) || '/'::text) || COALESCE((e.p ->> 'protocol'::text), 'TCP'::text))
           FROM jsonb_array_elements((objects.object #> '{spec,ports}'::text[])) WITH ORDINALITY e(p, i)
          ORDER BY e.i) AS ports,
    (objects.object #> '{spec,selector}'::text[]) AS selector,
    ARRAY( SELECT COALESCE((e.g ->> 'ip'::text), (e.g ->> 'hostname'::text)) AS "coalesce"
           FROM jsonb_array_elements((objects.object #> '{status,loadBalancer,ingress}'::text[])) WITH ORDINALITY e(g, i)
          ORDER BY e.i) AS external_addresses,
    objects.labels,
    ((objects.object #>> '{metadata,creationTimestamp}'::text[]))::timestamp with time zone AS creation_timestamp,
    objects.resource_version,
    objects.updated_at
   FROM kube_cdc.objects
  WHERE ((objects.api_group = ''::text) AND (objects.resource = 'services'::text) AND (objects.deleted_at IS NULL));


--
-- Name: changes_2026_11; Type: TABLE ATTACH; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ATTACH PARTITION kube_cdc.changes_2026_11 FOR VALUES FROM ('2026-11-01 00:00:00+00') TO ('2026-12-01 00:00:00+00');


--
-- Name: changes_2026_12; Type: TABLE ATTACH; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ATTACH PARTITION kube_cdc.changes_2026_12 FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00');


--
-- Name: changes_2027_01; Type: TABLE ATTACH; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ATTACH PARTITION kube_cdc.changes_2027_01 FOR VALUES FROM ('2027-01-01 00:00:00+00') TO ('2027-02-01 00:00:00+00');


--
-- Name: changes_2027_02; Type: TABLE ATTACH; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ATTACH PARTITION kube_cdc.changes_2027_02 FOR VALUES FROM ('2027-02-01 00:00:00+00') TO ('2027-03-01 00:00:00+00');


--
-- Name: changes_default; Type: TABLE ATTACH; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ATTACH PARTITION kube_cdc.changes_default DEFAULT;


--
-- Name: changes id; Type: DEFAULT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.changes ALTER COLUMN id SET DEFAULT nextval('kube_cdc.changes_id_seq'::regclass);


--
-- Data for Name: audit_events; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.audit_events VALUES ('a51a3561-7f7b-4489-870a-f72c07725e8a', 'east', 'create', '', 'configmaps', '', 'kube-system', 'kube-apiserver-legacy-service-account-token-tracking', '', 25, '78274097-f193-41dd-b956-a9465872c84c', '{}', 'system:apiserver', 'c265d2f8-e13f-4044-bba2-e8e0a9990080', '{system:authenticated,system:masters}', NULL, 'kube-apiserver/v1.36.5 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:05.206383+00', '2026-11-28 18:23:05.262504+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('ab89683b-fcfa-4127-9ade-a2c7d3bff7e5', 'east', 'create', '', 'configmaps', '', 'app', 'settings-0', '', 192, '6710c51f-4773-4d3d-becf-c757f262bab8', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.776171+00', '2026-11-28 18:23:07.777109+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('a55c3705-6cff-43bd-9954-057b2db26655', 'east', 'create', '', 'configmaps', '', 'ops', 'runbook-0', '', 193, 'e3328099-43b4-4d04-918b-13a176605660', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.77827+00', '2026-11-28 18:23:07.779134+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('5cf48cc9-8205-4854-8657-2de1411886be', 'east', 'create', '', 'configmaps', '', 'app', 'settings-1', '', 194, 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.780214+00', '2026-11-28 18:23:07.781017+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('70f74371-659c-4d6d-be08-abedb18da32b', 'east', 'create', '', 'configmaps', '', 'ops', 'runbook-1', '', 195, 'b3efbab6-b634-48c4-a5ca-783024cf37d9', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.782131+00', '2026-11-28 18:23:07.78287+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('a11500a1-f751-40a9-a50a-920f032dc364', 'east', 'create', '', 'configmaps', '', 'app', 'settings-2', '', 196, '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.783964+00', '2026-11-28 18:23:07.784738+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('49b9fd7b-c389-4b61-a553-b153a7b07735', 'east', 'create', '', 'configmaps', '', 'ops', 'runbook-2', '', 197, '60dd4fe8-a622-4f6a-bc35-6ee29479b7e1', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.78582+00', '2026-11-28 18:23:07.7868+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('49b18746-e2de-4626-ab96-335e30a03d84', 'east', 'create', '', 'configmaps', '', 'app', 'settings-3', '', 198, '2b32c078-6399-4ae2-bf7c-f63c3ba297ba', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.787945+00', '2026-11-28 18:23:07.788615+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('d69feac5-76a7-43a9-a2b5-3d0d78a96721', 'east', 'create', '', 'configmaps', '', 'ops', 'runbook-3', '', 199, 'db8ce94d-23f3-41ca-8856-c7158bab94ad', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.789581+00', '2026-11-28 18:23:07.7903+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('c5e6dc51-e96b-4774-be99-c56efece500a', 'east', 'create', '', 'configmaps', '', 'app', 'settings-4', '', 200, '503d2504-45d8-4110-8191-18832e40f925', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.791526+00', '2026-11-28 18:23:07.792379+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('794b48b9-5469-40c3-b6c9-6cf7ee7abc7e', 'east', 'create', '', 'configmaps', '', 'ops', 'runbook-4', '', 201, '419eec21-744a-4d87-b32c-06edcd7e28dd', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:07.793496+00', '2026-11-28 18:23:07.794353+00', '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_events VALUES ('83a5fcf4-6213-46cd-9457-b44b3aa5d10a', 'west', 'update', '', 'configmaps', '', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 207, '6710c51f-4773-4d3d-becf-c757f262bab8', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.256271+00', '2026-11-28 18:23:08.258557+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('00b32c11-9b57-4f20-af1a-5ef30e4cc931', 'west', 'update', '', 'configmaps', '', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 208, 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.260647+00', '2026-11-28 18:23:08.262453+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('0f4810f1-8c52-43c5-ba75-e3e6168053fa', 'west', 'update', '', 'configmaps', '', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 209, '6710c51f-4773-4d3d-becf-c757f262bab8', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.26427+00', '2026-11-28 18:23:08.265864+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('adb370e9-5c5a-42f0-b845-e6d7ed4fcb24', 'west', 'update', '', 'configmaps', '', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 210, 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.267524+00', '2026-11-28 18:23:08.268839+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('af1770ae-c29c-4584-bb6f-404adb4aa827', 'west', 'update', '', 'configmaps', '', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 211, '6710c51f-4773-4d3d-becf-c757f262bab8', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.270062+00', '2026-11-28 18:23:08.271618+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('22e65048-f2a8-4878-9592-172b10303e6a', 'west', 'update', '', 'configmaps', '', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 212, 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.272863+00', '2026-11-28 18:23:08.273907+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('403831e2-34a3-4ca9-bf7e-c89f87269143', 'west', 'delete', '', 'configmaps', '', 'ops', 'runbook-4', '', NULL, '419eec21-744a-4d87-b32c-06edcd7e28dd', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 200, '2026-11-28 18:23:08.274539+00', '2026-11-28 18:23:08.276218+00', '2026-11-28 18:23:08.458135+00');
INSERT INTO kube_cdc.audit_events VALUES ('2ab07e98-9908-4c98-88af-f7a0a490b256', 'west', 'create', '', 'configmaps', '', 'app', 'poison', '', 214, '242f4e29-c802-4538-b200-27cf933527e5', '{}', 'admin', 'admin', '{system:masters,system:authenticated}', NULL, 'upgradetest.test/v0.0.0 (linux/amd64) kubernetes/$Format', '{127.0.0.1}', 201, '2026-11-28 18:23:08.277318+00', '2026-11-28 18:23:08.278284+00', '2026-11-28 18:23:08.458135+00');


--
-- Data for Name: audit_log_positions; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.audit_log_positions VALUES ('east', 'vm', '/tmp/TestWriteTheFixtureOfAnOlderBinary509848128/001/audit.log', 9994527, 16589, '2026-11-28 18:23:08.048153+00');
INSERT INTO kube_cdc.audit_log_positions VALUES ('west', 'vm', '/tmp/TestWriteTheFixtureOfAnOlderBinary509848128/001/audit.log', 9994527, 29996, '2026-11-28 18:23:08.458135+00');


--
-- Data for Name: changes_2026_11; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.changes_2026_11 VALUES (1, 'east', 'apps', 'replicasets', 'app', 'web-5d8f', '1dd77a3c-f093-444f-bf71-f6f6e05670be', 203, 'create', false, true, '{"kind": "ReplicaSet", "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {"dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 0}, "metadata": {"labels": {"app": "web"}}}}, "status": {"replicas": 0}, "metadata": {"uid": "1dd77a3c-f093-444f-bf71-f6f6e05670be", "name": "web-5d8f", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "ownerReferences": [{"uid": "d7341cf7-6b75-400f-91d5-564c0563ce17", "kind": "Deployment", "name": "web", "apiVersion": "apps/v1", "controller": true}], "resourceVersion": "203", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "apps/v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.089936+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (2, 'east', '', 'services', 'app', 'web', '8be1a1d8-fe41-4a4b-9070-34494fb09469', 206, 'create', false, true, '{"kind": "Service", "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"app": "web"}, "clusterIP": "10.0.0.163", "clusterIPs": ["10.0.0.163"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}, "status": {"loadBalancer": {}}, "metadata": {"uid": "8be1a1d8-fe41-4a4b-9070-34494fb09469", "name": "web", "namespace": "app", "resourceVersion": "206", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.085631+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (3, 'east', '', 'services', 'default', 'kubernetes', 'e24ec861-ea4f-4095-ad22-9f3704db7ebb', 188, 'create', false, true, '{"kind": "Service", "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 19401}], "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}, "status": {"loadBalancer": {}}, "metadata": {"uid": "e24ec861-ea4f-4095-ad22-9f3704db7ebb", "name": "kubernetes", "labels": {"provider": "kubernetes", "component": "apiserver"}, "namespace": "default", "resourceVersion": "188", "creationTimestamp": "2026-11-28T18:23:06Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.085679+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (4, 'east', 'apps', 'deployments', 'app', 'web', 'd7341cf7-6b75-400f-91d5-564c0563ce17', 202, 'create', false, true, '{"kind": "Deployment", "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}, "template": {"spec": {"dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 0}, "metadata": {"labels": {"app": "web"}}}, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}, "status": {}, "metadata": {"uid": "d7341cf7-6b75-400f-91d5-564c0563ce17", "name": "web", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "resourceVersion": "202", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "apps/v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.099652+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (5, 'east', '', 'pods', 'app', 'web-5d8f-x1', 'd3e4cf89-672f-4d75-89d5-dde0e05fb4a7', 204, 'create', false, true, '{"kind": "Pod", "spec": {"nodeName": "node-1", "priority": 0, "dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "tolerations": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "preemptionPolicy": "PreemptLowerPriority", "enableServiceLinks": true, "terminationGracePeriodSeconds": 30}, "status": {"phase": "Pending", "qosClass": "Burstable"}, "metadata": {"uid": "d3e4cf89-672f-4d75-89d5-dde0e05fb4a7", "name": "web-5d8f-x1", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "ownerReferences": [{"uid": "1dd77a3c-f093-444f-bf71-f6f6e05670be", "kind": "ReplicaSet", "name": "web-5d8f", "apiVersion": "apps/v1", "controller": true}], "resourceVersion": "204", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.127161+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (6, 'east', '', 'namespaces', '', 'app', 'b40280e7-d9ca-43ba-88f9-e9cd0ddd4f5f', 190, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "b40280e7-d9ca-43ba-88f9-e9cd0ddd4f5f", "name": "app", "labels": {"kubernetes.io/metadata.name": "app"}, "resourceVersion": "190", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.106873+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (7, 'east', '', 'namespaces', '', 'default', '9d8d6b3b-7c28-4092-a302-df60bb75eaa5', 22, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "9d8d6b3b-7c28-4092-a302-df60bb75eaa5", "name": "default", "labels": {"kubernetes.io/metadata.name": "default"}, "resourceVersion": "22", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.106897+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (8, 'east', '', 'namespaces', '', 'kube-node-lease', '1d4afc8f-bb98-4d46-9b57-dbaebc536119', 28, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "1d4afc8f-bb98-4d46-9b57-dbaebc536119", "name": "kube-node-lease", "labels": {"kubernetes.io/metadata.name": "kube-node-lease"}, "resourceVersion": "28", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.106904+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (9, 'east', '', 'namespaces', '', 'kube-public', 'c4103123-b0ac-4076-8016-1d034972bdd0', 17, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "c4103123-b0ac-4076-8016-1d034972bdd0", "name": "kube-public", "labels": {"kubernetes.io/metadata.name": "kube-public"}, "resourceVersion": "17", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.106911+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (10, 'east', '', 'namespaces', '', 'kube-system', '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014', 7, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "55a686c8-3efd-4fe5-a5ac-0eccbd5bc014", "name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}, "resourceVersion": "7", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.106918+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (11, 'east', '', 'namespaces', '', 'ops', 'b6152379-91f6-4037-881a-b015f3846cb9', 191, 'create', false, true, '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "b6152379-91f6-4037-881a-b015f3846cb9", "name": "ops", "labels": {"kubernetes.io/metadata.name": "ops"}, "resourceVersion": "191", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.106924+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (12, 'east', '', 'configmaps', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 192, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "192", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151035+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (13, 'east', '', 'configmaps', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 194, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "194", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151058+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (14, 'east', '', 'configmaps', 'app', 'settings-2', '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', 196, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "18ee8195-1cfd-4eb1-8f5d-f877f0c98079", "name": "settings-2", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "196", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.15108+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (15, 'east', '', 'configmaps', 'app', 'settings-3', '2b32c078-6399-4ae2-bf7c-f63c3ba297ba', 198, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "2b32c078-6399-4ae2-bf7c-f63c3ba297ba", "name": "settings-3", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "198", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151085+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (16, 'east', '', 'configmaps', 'app', 'settings-4', '503d2504-45d8-4110-8191-18832e40f925', 200, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "503d2504-45d8-4110-8191-18832e40f925", "name": "settings-4", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "200", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151095+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (17, 'east', '', 'configmaps', 'kube-system', 'kube-apiserver-legacy-service-account-token-tracking', '78274097-f193-41dd-b956-a9465872c84c', 25, 'create', false, true, '{"data": {"since": "2026-11-28"}, "kind": "ConfigMap", "metadata": {"uid": "78274097-f193-41dd-b956-a9465872c84c", "name": "kube-apiserver-legacy-service-account-token-tracking", "namespace": "kube-system", "resourceVersion": "25", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.151101+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (18, 'east', '', 'configmaps', 'ops', 'runbook-0', 'e3328099-43b4-4d04-918b-13a176605660', 193, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "e3328099-43b4-4d04-918b-13a176605660", "name": "runbook-0", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "193", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151108+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (19, 'east', '', 'configmaps', 'ops', 'runbook-1', 'b3efbab6-b634-48c4-a5ca-783024cf37d9', 195, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "b3efbab6-b634-48c4-a5ca-783024cf37d9", "name": "runbook-1", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "195", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151114+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (20, 'east', '', 'configmaps', 'ops', 'runbook-2', '60dd4fe8-a622-4f6a-bc35-6ee29479b7e1', 197, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "60dd4fe8-a622-4f6a-bc35-6ee29479b7e1", "name": "runbook-2", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "197", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151119+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (21, 'east', '', 'configmaps', 'ops', 'runbook-3', 'db8ce94d-23f3-41ca-8856-c7158bab94ad', 199, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "db8ce94d-23f3-41ca-8856-c7158bab94ad", "name": "runbook-3", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "199", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151124+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (22, 'east', '', 'configmaps', 'ops', 'runbook-4', '419eec21-744a-4d87-b32c-06edcd7e28dd', 201, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "419eec21-744a-4d87-b32c-06edcd7e28dd", "name": "runbook-4", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "201", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.151129+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (23, 'east', '', 'configmaps', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 207, 'update', false, false, '{"data": {"v": "2", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "207", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.259075+00', NULL, 0, '{/data/mode,/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (24, 'east', '', 'configmaps', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 208, 'update', false, false, '{"data": {"v": "2"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "208", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.262172+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (25, 'east', '', 'configmaps', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 209, 'update', false, false, '{"data": {"v": "3", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "209", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.266103+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (26, 'east', '', 'configmaps', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 210, 'update', false, false, '{"data": {"v": "3"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "210", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.270598+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (27, 'east', '', 'configmaps', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 211, 'update', false, false, '{"data": {"v": "4", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "211", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.271759+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (28, 'east', '', 'configmaps', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 212, 'update', false, false, '{"data": {"v": "4"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "212", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.274434+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');
INSERT INTO kube_cdc.changes_2026_11 VALUES (29, 'east', '', 'configmaps', 'ops', 'runbook-4', '419eec21-744a-4d87-b32c-06edcd7e28dd', 213, 'delete', false, false, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "419eec21-744a-4d87-b32c-06edcd7e28dd", "name": "runbook-4", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "213", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.277237+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (30, 'west', '', 'configmaps', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 211, 'create', false, true, '{"data": {"v": "4", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "211", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.490278+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (31, 'west', '', 'configmaps', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 212, 'create', false, true, '{"data": {"v": "4"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "212", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.490285+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (32, 'west', '', 'configmaps', 'app', 'settings-2', '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', 196, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "18ee8195-1cfd-4eb1-8f5d-f877f0c98079", "name": "settings-2", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "196", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.490319+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (33, 'west', '', 'configmaps', 'app', 'settings-3', '2b32c078-6399-4ae2-bf7c-f63c3ba297ba', 198, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "2b32c078-6399-4ae2-bf7c-f63c3ba297ba", "name": "settings-3", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "198", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.490324+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (34, 'west', '', 'configmaps', 'app', 'settings-4', '503d2504-45d8-4110-8191-18832e40f925', 200, 'create', false, true, '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "503d2504-45d8-4110-8191-18832e40f925", "name": "settings-4", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "200", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.490329+00', NULL, 0, NULL);
INSERT INTO kube_cdc.changes_2026_11 VALUES (35, 'west', '', 'configmaps', 'app', 'settings-2', '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', 215, 'update', false, false, '{"data": {"v": "west"}, "kind": "ConfigMap", "metadata": {"uid": "18ee8195-1cfd-4eb1-8f5d-f877f0c98079", "name": "settings-2", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "215", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.515765+00', NULL, 0, '{/data/v,/metadata/resourceVersion}');


--
-- Data for Name: changes_2026_12; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: changes_2027_01; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: changes_2027_02; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: changes_default; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: checkpoints; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', 'apps', 'replicasets', '', 206, '2026-11-28 18:23:08.103599+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', '', 'services', '', 206, '2026-11-28 18:23:08.123444+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', 'apps', 'deployments', '', 206, '2026-11-28 18:23:08.127665+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', '', 'pods', '', 206, '2026-11-28 18:23:08.144611+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', '', 'namespaces', '', 206, '2026-11-28 18:23:08.132243+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('east', 'warehouse', '', 'configmaps', '', 214, '2026-11-28 18:23:08.280859+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');
INSERT INTO kube_cdc.checkpoints VALUES ('west', 'warehouse', '', 'configmaps', 'e8bdd92778f1', 215, '2026-11-28 18:23:08.516897+00', 0, '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014');


--
-- Data for Name: epochs; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: history_skipped; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--



--
-- Data for Name: objects; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.objects VALUES ('east', 'apps', 'v1', 'replicasets', 'ReplicaSet', 'app', 'web-5d8f', '1dd77a3c-f093-444f-bf71-f6f6e05670be', 203, '{"app": "web"}', '{"kind": "ReplicaSet", "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {"dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 0}, "metadata": {"labels": {"app": "web"}}}}, "status": {"replicas": 0}, "metadata": {"uid": "1dd77a3c-f093-444f-bf71-f6f6e05670be", "name": "web-5d8f", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "ownerReferences": [{"uid": "d7341cf7-6b75-400f-91d5-564c0563ce17", "kind": "Deployment", "name": "web", "apiVersion": "apps/v1", "controller": true}], "resourceVersion": "203", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "apps/v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.103599+00', '2026-11-28 18:23:08.103599+00', NULL, false, NULL, 0, 756, 8309628927163423102, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'services', 'Service', 'app', 'web', '8be1a1d8-fe41-4a4b-9070-34494fb09469', 206, '{}', '{"kind": "Service", "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"app": "web"}, "clusterIP": "10.0.0.163", "clusterIPs": ["10.0.0.163"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}, "status": {"loadBalancer": {}}, "metadata": {"uid": "8be1a1d8-fe41-4a4b-9070-34494fb09469", "name": "web", "namespace": "app", "resourceVersion": "206", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.123444+00', '2026-11-28 18:23:08.123444+00', NULL, false, NULL, 0, 759, 2114566284463457760, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'services', 'Service', 'default', 'kubernetes', 'e24ec861-ea4f-4095-ad22-9f3704db7ebb', 188, '{"provider": "kubernetes", "component": "apiserver"}', '{"kind": "Service", "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 19401}], "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}, "status": {"loadBalancer": {}}, "metadata": {"uid": "e24ec861-ea4f-4095-ad22-9f3704db7ebb", "name": "kubernetes", "labels": {"provider": "kubernetes", "component": "apiserver"}, "namespace": "default", "resourceVersion": "188", "creationTimestamp": "2026-11-28T18:23:06Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.123444+00', '2026-11-28 18:23:08.123444+00', NULL, false, NULL, 0, 759, -7657313029139679844, true);
INSERT INTO kube_cdc.objects VALUES ('east', 'apps', 'v1', 'deployments', 'Deployment', 'app', 'web', 'd7341cf7-6b75-400f-91d5-564c0563ce17', 202, '{"app": "web"}', '{"kind": "Deployment", "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}, "template": {"spec": {"dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 0}, "metadata": {"labels": {"app": "web"}}}, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}, "status": {}, "metadata": {"uid": "d7341cf7-6b75-400f-91d5-564c0563ce17", "name": "web", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "resourceVersion": "202", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "apps/v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.127665+00', '2026-11-28 18:23:08.127665+00', NULL, false, NULL, 0, 761, -1711316563234212407, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'pods', 'Pod', 'app', 'web-5d8f-x1', 'd3e4cf89-672f-4d75-89d5-dde0e05fb4a7', 204, '{"app": "web"}', '{"kind": "Pod", "spec": {"nodeName": "node-1", "priority": 0, "dnsPolicy": "ClusterFirst", "containers": [{"name": "main", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "tolerations": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}], "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "preemptionPolicy": "PreemptLowerPriority", "enableServiceLinks": true, "terminationGracePeriodSeconds": 30}, "status": {"phase": "Pending", "qosClass": "Burstable"}, "metadata": {"uid": "d3e4cf89-672f-4d75-89d5-dde0e05fb4a7", "name": "web-5d8f-x1", "labels": {"app": "web"}, "namespace": "app", "generation": 1, "ownerReferences": [{"uid": "1dd77a3c-f093-444f-bf71-f6f6e05670be", "kind": "ReplicaSet", "name": "web-5d8f", "apiVersion": "apps/v1", "controller": true}], "resourceVersion": "204", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.144611+00', '2026-11-28 18:23:08.144611+00', NULL, false, NULL, 0, 763, -8835609041081973800, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'app', 'b40280e7-d9ca-43ba-88f9-e9cd0ddd4f5f', 190, '{"kubernetes.io/metadata.name": "app"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "b40280e7-d9ca-43ba-88f9-e9cd0ddd4f5f", "name": "app", "labels": {"kubernetes.io/metadata.name": "app"}, "resourceVersion": "190", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, 4216501087938704354, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'default', '9d8d6b3b-7c28-4092-a302-df60bb75eaa5', 22, '{"kubernetes.io/metadata.name": "default"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "9d8d6b3b-7c28-4092-a302-df60bb75eaa5", "name": "default", "labels": {"kubernetes.io/metadata.name": "default"}, "resourceVersion": "22", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, -4075767481613742135, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'kube-node-lease', '1d4afc8f-bb98-4d46-9b57-dbaebc536119', 28, '{"kubernetes.io/metadata.name": "kube-node-lease"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "1d4afc8f-bb98-4d46-9b57-dbaebc536119", "name": "kube-node-lease", "labels": {"kubernetes.io/metadata.name": "kube-node-lease"}, "resourceVersion": "28", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, -1314131343430744182, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'kube-public', 'c4103123-b0ac-4076-8016-1d034972bdd0', 17, '{"kubernetes.io/metadata.name": "kube-public"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "c4103123-b0ac-4076-8016-1d034972bdd0", "name": "kube-public", "labels": {"kubernetes.io/metadata.name": "kube-public"}, "resourceVersion": "17", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, 5931835147189258922, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'kube-system', '55a686c8-3efd-4fe5-a5ac-0eccbd5bc014', 7, '{"kubernetes.io/metadata.name": "kube-system"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "55a686c8-3efd-4fe5-a5ac-0eccbd5bc014", "name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}, "resourceVersion": "7", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, -5181954550293616845, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'namespaces', 'Namespace', '', 'ops', 'b6152379-91f6-4037-881a-b015f3846cb9', 191, '{"kubernetes.io/metadata.name": "ops"}', '{"kind": "Namespace", "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}, "metadata": {"uid": "b6152379-91f6-4037-881a-b015f3846cb9", "name": "ops", "labels": {"kubernetes.io/metadata.name": "ops"}, "resourceVersion": "191", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.132243+00', '2026-11-28 18:23:08.132243+00', NULL, false, NULL, 0, 762, -660653228325141595, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-2', '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', 196, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "18ee8195-1cfd-4eb1-8f5d-f877f0c98079", "name": "settings-2", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "196", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, 3588624787395213032, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-3', '2b32c078-6399-4ae2-bf7c-f63c3ba297ba', 198, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "2b32c078-6399-4ae2-bf7c-f63c3ba297ba", "name": "settings-3", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "198", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, -3086901292002568824, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-4', '503d2504-45d8-4110-8191-18832e40f925', 200, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "503d2504-45d8-4110-8191-18832e40f925", "name": "settings-4", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "200", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, 1528697187580678998, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'kube-system', 'kube-apiserver-legacy-service-account-token-tracking', '78274097-f193-41dd-b956-a9465872c84c', 25, '{}', '{"data": {"since": "2026-11-28"}, "kind": "ConfigMap", "metadata": {"uid": "78274097-f193-41dd-b956-a9465872c84c", "name": "kube-apiserver-legacy-service-account-token-tracking", "namespace": "kube-system", "resourceVersion": "25", "creationTimestamp": "2026-11-28T18:23:05Z"}, "apiVersion": "v1"}', 'kube-apiserver/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, -983123191765706864, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'ops', 'runbook-0', 'e3328099-43b4-4d04-918b-13a176605660', 193, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "e3328099-43b4-4d04-918b-13a176605660", "name": "runbook-0", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "193", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, 3169255590204285401, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'ops', 'runbook-1', 'b3efbab6-b634-48c4-a5ca-783024cf37d9', 195, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "b3efbab6-b634-48c4-a5ca-783024cf37d9", "name": "runbook-1", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "195", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, 6302383014608681734, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'ops', 'runbook-2', '60dd4fe8-a622-4f6a-bc35-6ee29479b7e1', 197, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "60dd4fe8-a622-4f6a-bc35-6ee29479b7e1", "name": "runbook-2", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "197", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, -1759744969772905871, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'ops', 'runbook-3', 'db8ce94d-23f3-41ca-8856-c7158bab94ad', 199, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "db8ce94d-23f3-41ca-8856-c7158bab94ad", "name": "runbook-3", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "199", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.156539+00', NULL, false, NULL, 0, 765, -4457182052169050263, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 211, '{"tier": "web"}', '{"data": {"v": "4", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "211", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.280859+00', NULL, false, NULL, 0, 768, 1885665072153306890, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 212, '{"tier": "web"}', '{"data": {"v": "4"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "212", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.280859+00', NULL, false, NULL, 0, 768, 7459604054537349684, true);
INSERT INTO kube_cdc.objects VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'ops', 'runbook-4', '419eec21-744a-4d87-b32c-06edcd7e28dd', 213, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "419eec21-744a-4d87-b32c-06edcd7e28dd", "name": "runbook-4", "labels": {"tier": "web"}, "namespace": "ops", "resourceVersion": "213", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.156539+00', '2026-11-28 18:23:08.280859+00', '2026-11-28 18:23:08.280859+00', false, NULL, 0, 768, -1009721949574838234, true);
INSERT INTO kube_cdc.objects VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-0', '6710c51f-4773-4d3d-becf-c757f262bab8', 211, '{"tier": "web"}', '{"data": {"v": "4", "mode": "blue"}, "kind": "ConfigMap", "metadata": {"uid": "6710c51f-4773-4d3d-becf-c757f262bab8", "name": "settings-0", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "211", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.494709+00', '2026-11-28 18:23:08.494709+00', NULL, false, NULL, 0, 777, 1885665072153306890, true);
INSERT INTO kube_cdc.objects VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-1', 'e649c2c8-f6f2-4eba-815d-944f9374b6c2', 212, '{"tier": "web"}', '{"data": {"v": "4"}, "kind": "ConfigMap", "metadata": {"uid": "e649c2c8-f6f2-4eba-815d-944f9374b6c2", "name": "settings-1", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "212", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.494709+00', '2026-11-28 18:23:08.494709+00', NULL, false, NULL, 0, 777, 7459604054537349684, true);
INSERT INTO kube_cdc.objects VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-3', '2b32c078-6399-4ae2-bf7c-f63c3ba297ba', 198, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "2b32c078-6399-4ae2-bf7c-f63c3ba297ba", "name": "settings-3", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "198", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.494709+00', '2026-11-28 18:23:08.494709+00', NULL, false, NULL, 0, 777, -3086901292002568824, true);
INSERT INTO kube_cdc.objects VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-4', '503d2504-45d8-4110-8191-18832e40f925', 200, '{"tier": "web"}', '{"data": {"v": "1"}, "kind": "ConfigMap", "metadata": {"uid": "503d2504-45d8-4110-8191-18832e40f925", "name": "settings-4", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "200", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.494709+00', '2026-11-28 18:23:08.494709+00', NULL, false, NULL, 0, 777, 1528697187580678998, true);
INSERT INTO kube_cdc.objects VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'settings-2', '18ee8195-1cfd-4eb1-8f5d-f877f0c98079', 215, '{"tier": "web"}', '{"data": {"v": "west"}, "kind": "ConfigMap", "metadata": {"uid": "18ee8195-1cfd-4eb1-8f5d-f877f0c98079", "name": "settings-2", "labels": {"tier": "web"}, "namespace": "app", "resourceVersion": "215", "creationTimestamp": "2026-11-28T18:23:07Z"}, "apiVersion": "v1"}', 'upgradetest.test/Update', '2026-11-28 18:23:08.494709+00', '2026-11-28 18:23:08.516897+00', NULL, false, NULL, 0, 778, 3313870403276526964, true);


--
-- Data for Name: quarantine; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.quarantine VALUES ('east', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'poison', '242f4e29-c802-4538-b200-27cf933527e5', 214, 'create', false, false, 'upgradetest.test/Update', '2026-11-28 18:23:08.278684+00', 'jsonb cannot store the escape \u0000 (byte 237 of the JSON)', '22P05', '\x7b226b696e64223a22436f6e6669674d6170222c2261706956657273696f6e223a227631222c226d65746164617461223a7b226e616d65223a22706f69736f6e222c226e616d657370616365223a22617070222c22756964223a2232343266346532392d633830322d343533382d623230302d323763663933333532376535222c227265736f7572636556657273696f6e223a22323134222c226372656174696f6e54696d657374616d70223a22323032362d31312d32385431383a32333a30385a222c226c6162656c73223a7b2274696572223a22776562227d7d2c2264617461223a7b2276223a226e756c5c753030303062797465227d7d', '2026-11-28 18:23:08.280859+00', NULL, NULL, 0);
INSERT INTO kube_cdc.quarantine VALUES ('west', '', 'v1', 'configmaps', 'ConfigMap', 'app', 'poison', '242f4e29-c802-4538-b200-27cf933527e5', 214, 'create', false, true, 'upgradetest.test/Update', '2026-11-28 18:23:08.490251+00', 'jsonb cannot store the escape \u0000 (byte 237 of the JSON)', '22P05', '\x7b226b696e64223a22436f6e6669674d6170222c2261706956657273696f6e223a227631222c226d65746164617461223a7b226e616d65223a22706f69736f6e222c226e616d657370616365223a22617070222c22756964223a2232343266346532392d633830322d343533382d623230302d323763663933333532376535222c227265736f7572636556657273696f6e223a22323134222c226372656174696f6e54696d657374616d70223a22323032362d31312d32385431383a32333a30385a222c226c6162656c73223a7b2274696572223a22776562227d7d2c2264617461223a7b2276223a226e756c5c753030303062797465227d7d', '2026-11-28 18:23:08.494709+00', NULL, NULL, 0);


--
-- Data for Name: retention; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.retention VALUES ('east', NULL, '2026-11-28 18:23:08.01954+00');
INSERT INTO kube_cdc.retention VALUES ('west', NULL, '2026-11-28 18:23:08.468696+00');


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: kube_cdc; Owner: -
--

INSERT INTO kube_cdc.schema_migrations VALUES ('001_init', '2026-11-28 18:23:07.86807+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('002_views', '2026-11-28 18:23:07.882811+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('003_quarantine', '2026-11-28 18:23:07.886253+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('004_scopes', '2026-11-28 18:23:07.891036+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('005_history', '2026-11-28 18:23:07.893561+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('006_epochs', '2026-11-28 18:23:07.894855+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('007_cluster_identity', '2026-11-28 18:23:07.900091+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('008_drift', '2026-11-28 18:23:07.900604+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('009_resolved', '2026-11-28 18:23:07.901308+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('010_quarantine_epoch', '2026-11-28 18:23:07.90248+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('011_history_noise', '2026-11-28 18:23:07.904141+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('012_partitions', '2026-11-28 18:23:07.907742+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('013_asof_relations', '2026-11-28 18:23:07.955105+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('014_actors', '2026-11-28 18:23:07.967717+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('015_ui_feed', '2026-11-28 18:23:07.982479+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('016_changes_indexes', '2026-11-28 18:23:07.991862+00');
INSERT INTO kube_cdc.schema_migrations VALUES ('017_history_changed', '2026-11-28 18:23:07.993785+00');


--
-- Name: changes_id_seq; Type: SEQUENCE SET; Schema: kube_cdc; Owner: -
--

SELECT pg_catalog.setval('kube_cdc.changes_id_seq', 35, true);


--
-- Name: audit_events audit_events_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (audit_id);


--
-- Name: audit_log_positions audit_log_positions_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.audit_log_positions
    ADD CONSTRAINT audit_log_positions_pkey PRIMARY KEY (cluster, reader, path);


--
-- Name: checkpoints checkpoints_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.checkpoints
    ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (cluster, sink, api_group, resource, scope);


--
-- Name: epochs epochs_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.epochs
    ADD CONSTRAINT epochs_pkey PRIMARY KEY (cluster, sink, api_group, resource, scope, epoch);


--
-- Name: history_skipped history_skipped_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.history_skipped
    ADD CONSTRAINT history_skipped_pkey PRIMARY KEY (cluster, sink, api_group, resource, scope);


--
-- Name: objects objects_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.objects
    ADD CONSTRAINT objects_pkey PRIMARY KEY (cluster, api_group, resource, namespace, name);


--
-- Name: quarantine quarantine_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.quarantine
    ADD CONSTRAINT quarantine_pkey PRIMARY KEY (cluster, api_group, resource, namespace, name, epoch, resource_version, op);


--
-- Name: retention retention_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.retention
    ADD CONSTRAINT retention_pkey PRIMARY KEY (cluster);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: kube_cdc; Owner: -
--

ALTER TABLE ONLY kube_cdc.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: audit_events_received_at; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX audit_events_received_at ON kube_cdc.audit_events USING btree (received_at);


--
-- Name: audit_events_rv; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX audit_events_rv ON kube_cdc.audit_events USING btree (cluster, api_group, resource, namespace, name, response_rv);


--
-- Name: audit_events_time; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX audit_events_time ON kube_cdc.audit_events USING btree (cluster, api_group, resource, namespace, name, stage_at);


--
-- Name: changes_key_observed; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_key_observed ON ONLY kube_cdc.changes USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_2026_11_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_11_cluster_api_group_resource_namespace_name_o_idx ON kube_cdc.changes_2026_11 USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_feed; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_feed ON ONLY kube_cdc.changes USING btree (cluster, observed_at, id);


--
-- Name: changes_2026_11_cluster_observed_at_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_11_cluster_observed_at_id_idx ON kube_cdc.changes_2026_11 USING btree (cluster, observed_at, id);


--
-- Name: changes_feed_deletes; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_feed_deletes ON ONLY kube_cdc.changes USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_2026_11_cluster_observed_at_id_idx1; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_11_cluster_observed_at_id_idx1 ON kube_cdc.changes_2026_11 USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_id; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_id ON ONLY kube_cdc.changes USING btree (id);


--
-- Name: changes_2026_11_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_11_id_idx ON kube_cdc.changes_2026_11 USING btree (id);


--
-- Name: changes_observed_at; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_observed_at ON ONLY kube_cdc.changes USING brin (observed_at);


--
-- Name: changes_2026_11_observed_at_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_11_observed_at_idx ON kube_cdc.changes_2026_11 USING brin (observed_at);


--
-- Name: changes_2026_12_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_12_cluster_api_group_resource_namespace_name_o_idx ON kube_cdc.changes_2026_12 USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_2026_12_cluster_observed_at_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_12_cluster_observed_at_id_idx ON kube_cdc.changes_2026_12 USING btree (cluster, observed_at, id);


--
-- Name: changes_2026_12_cluster_observed_at_id_idx1; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_12_cluster_observed_at_id_idx1 ON kube_cdc.changes_2026_12 USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_2026_12_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_12_id_idx ON kube_cdc.changes_2026_12 USING btree (id);


--
-- Name: changes_2026_12_observed_at_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2026_12_observed_at_idx ON kube_cdc.changes_2026_12 USING brin (observed_at);


--
-- Name: changes_2027_01_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_01_cluster_api_group_resource_namespace_name_o_idx ON kube_cdc.changes_2027_01 USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_2027_01_cluster_observed_at_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_01_cluster_observed_at_id_idx ON kube_cdc.changes_2027_01 USING btree (cluster, observed_at, id);


--
-- Name: changes_2027_01_cluster_observed_at_id_idx1; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_01_cluster_observed_at_id_idx1 ON kube_cdc.changes_2027_01 USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_2027_01_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_01_id_idx ON kube_cdc.changes_2027_01 USING btree (id);


--
-- Name: changes_2027_01_observed_at_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_01_observed_at_idx ON kube_cdc.changes_2027_01 USING brin (observed_at);


--
-- Name: changes_2027_02_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_02_cluster_api_group_resource_namespace_name_o_idx ON kube_cdc.changes_2027_02 USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_2027_02_cluster_observed_at_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_02_cluster_observed_at_id_idx ON kube_cdc.changes_2027_02 USING btree (cluster, observed_at, id);


--
-- Name: changes_2027_02_cluster_observed_at_id_idx1; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_02_cluster_observed_at_id_idx1 ON kube_cdc.changes_2027_02 USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_2027_02_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_02_id_idx ON kube_cdc.changes_2027_02 USING btree (id);


--
-- Name: changes_2027_02_observed_at_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_2027_02_observed_at_idx ON kube_cdc.changes_2027_02 USING brin (observed_at);


--
-- Name: changes_default_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_default_cluster_api_group_resource_namespace_name_o_idx ON kube_cdc.changes_default USING btree (cluster, api_group, resource, namespace, name, observed_at, id);


--
-- Name: changes_default_cluster_observed_at_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_default_cluster_observed_at_id_idx ON kube_cdc.changes_default USING btree (cluster, observed_at, id);


--
-- Name: changes_default_cluster_observed_at_id_idx1; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_default_cluster_observed_at_id_idx1 ON kube_cdc.changes_default USING btree (cluster, observed_at, id) WHERE (op = 'delete'::text);


--
-- Name: changes_default_id_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_default_id_idx ON kube_cdc.changes_default USING btree (id);


--
-- Name: changes_default_observed_at_idx; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX changes_default_observed_at_idx ON kube_cdc.changes_default USING brin (observed_at);


--
-- Name: objects_endpointslice_service; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX objects_endpointslice_service ON kube_cdc.objects USING btree (cluster, namespace, ((labels ->> 'kubernetes.io/service-name'::text))) WHERE ((api_group = 'discovery.k8s.io'::text) AND (resource = 'endpointslices'::text) AND (deleted_at IS NULL));


--
-- Name: objects_inferred; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX objects_inferred ON kube_cdc.objects USING btree (cluster, api_group, resource) WHERE ((deleted_at IS NOT NULL) AND delete_inferred);


--
-- Name: objects_live; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX objects_live ON kube_cdc.objects USING btree (cluster, api_group, resource) INCLUDE (namespace, name, uid, resource_version) WHERE (deleted_at IS NULL);


--
-- Name: objects_live_uid; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX objects_live_uid ON kube_cdc.objects USING btree (cluster, uid) WHERE (deleted_at IS NULL);


--
-- Name: quarantine_unresolved; Type: INDEX; Schema: kube_cdc; Owner: -
--

CREATE INDEX quarantine_unresolved ON kube_cdc.quarantine USING btree (cluster, api_group, resource, namespace, name) WHERE (resolved_at IS NULL);


--
-- Name: changes_2026_11_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_key_observed ATTACH PARTITION kube_cdc.changes_2026_11_cluster_api_group_resource_namespace_name_o_idx;


--
-- Name: changes_2026_11_cluster_observed_at_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed ATTACH PARTITION kube_cdc.changes_2026_11_cluster_observed_at_id_idx;


--
-- Name: changes_2026_11_cluster_observed_at_id_idx1; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed_deletes ATTACH PARTITION kube_cdc.changes_2026_11_cluster_observed_at_id_idx1;


--
-- Name: changes_2026_11_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_id ATTACH PARTITION kube_cdc.changes_2026_11_id_idx;


--
-- Name: changes_2026_11_observed_at_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_observed_at ATTACH PARTITION kube_cdc.changes_2026_11_observed_at_idx;


--
-- Name: changes_2026_12_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_key_observed ATTACH PARTITION kube_cdc.changes_2026_12_cluster_api_group_resource_namespace_name_o_idx;


--
-- Name: changes_2026_12_cluster_observed_at_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed ATTACH PARTITION kube_cdc.changes_2026_12_cluster_observed_at_id_idx;


--
-- Name: changes_2026_12_cluster_observed_at_id_idx1; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed_deletes ATTACH PARTITION kube_cdc.changes_2026_12_cluster_observed_at_id_idx1;


--
-- Name: changes_2026_12_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_id ATTACH PARTITION kube_cdc.changes_2026_12_id_idx;


--
-- Name: changes_2026_12_observed_at_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_observed_at ATTACH PARTITION kube_cdc.changes_2026_12_observed_at_idx;


--
-- Name: changes_2027_01_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_key_observed ATTACH PARTITION kube_cdc.changes_2027_01_cluster_api_group_resource_namespace_name_o_idx;


--
-- Name: changes_2027_01_cluster_observed_at_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed ATTACH PARTITION kube_cdc.changes_2027_01_cluster_observed_at_id_idx;


--
-- Name: changes_2027_01_cluster_observed_at_id_idx1; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed_deletes ATTACH PARTITION kube_cdc.changes_2027_01_cluster_observed_at_id_idx1;


--
-- Name: changes_2027_01_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_id ATTACH PARTITION kube_cdc.changes_2027_01_id_idx;


--
-- Name: changes_2027_01_observed_at_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_observed_at ATTACH PARTITION kube_cdc.changes_2027_01_observed_at_idx;


--
-- Name: changes_2027_02_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_key_observed ATTACH PARTITION kube_cdc.changes_2027_02_cluster_api_group_resource_namespace_name_o_idx;


--
-- Name: changes_2027_02_cluster_observed_at_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed ATTACH PARTITION kube_cdc.changes_2027_02_cluster_observed_at_id_idx;


--
-- Name: changes_2027_02_cluster_observed_at_id_idx1; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed_deletes ATTACH PARTITION kube_cdc.changes_2027_02_cluster_observed_at_id_idx1;


--
-- Name: changes_2027_02_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_id ATTACH PARTITION kube_cdc.changes_2027_02_id_idx;


--
-- Name: changes_2027_02_observed_at_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_observed_at ATTACH PARTITION kube_cdc.changes_2027_02_observed_at_idx;


--
-- Name: changes_default_cluster_api_group_resource_namespace_name_o_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_key_observed ATTACH PARTITION kube_cdc.changes_default_cluster_api_group_resource_namespace_name_o_idx;


--
-- Name: changes_default_cluster_observed_at_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed ATTACH PARTITION kube_cdc.changes_default_cluster_observed_at_id_idx;


--
-- Name: changes_default_cluster_observed_at_id_idx1; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_feed_deletes ATTACH PARTITION kube_cdc.changes_default_cluster_observed_at_id_idx1;


--
-- Name: changes_default_id_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_id ATTACH PARTITION kube_cdc.changes_default_id_idx;


--
-- Name: changes_default_observed_at_idx; Type: INDEX ATTACH; Schema: kube_cdc; Owner: -
--

ALTER INDEX kube_cdc.changes_observed_at ATTACH PARTITION kube_cdc.changes_default_observed_at_idx;


--
-- Name: epochs epochs_began_after; Type: TRIGGER; Schema: kube_cdc; Owner: -
--

CREATE TRIGGER epochs_began_after BEFORE INSERT ON kube_cdc.epochs FOR EACH ROW EXECUTE FUNCTION kube_cdc.epochs_began_after();


--
-- PostgreSQL database dump complete
--


