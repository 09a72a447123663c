-- Who made each change: the apiserver's audit events (audit.k8s.io/v1), received by
-- kube-cdc's audit receiver (internal/audit), joined to changes at read time by the view
-- change_actors (docs/contract.md, "actor"). Only what the join needs is stored; request
-- and response bodies never are.

-- One row per audit event that completed a write (create, update, patch, delete,
-- deletecollection) with a 2xx status and was not a dry run. The apiserver re-sends a
-- batch it saw no 2xx for: the audit ID makes a re-sent event insert nothing.
CREATE TABLE audit_events (
    audit_id      text        PRIMARY KEY,
    cluster       text        NOT NULL,   -- the receiving kube-cdc's cluster
    verb          text        NOT NULL,
    api_group     text        NOT NULL,   -- objectRef: '' for the core group
    resource      text        NOT NULL,
    subresource   text        NOT NULL DEFAULT '',  -- 'status', 'scale'…
    namespace     text        NOT NULL,
    name          text        NOT NULL,   -- '' for a deletecollection
    object_uid    text        NOT NULL DEFAULT '',  -- objectRef.uid: what the request named
    response_rv   bigint,                 -- the response object's metadata.resourceVersion
    response_uid  text        NOT NULL DEFAULT '',  -- its uid, or a delete Status's details.uid
    deleted_uids  text[]      NOT NULL DEFAULT '{}',  -- a deletecollection's items
    username      text        NOT NULL,   -- the user the write was made as (the impersonated one)
    user_uid      text        NOT NULL DEFAULT '',
    groups        text[]      NOT NULL DEFAULT '{}',
    impersonator  text,                   -- who impersonated username; NULL when nobody did
    user_agent    text        NOT NULL DEFAULT '',
    source_ips    text[]      NOT NULL DEFAULT '{}',
    code          int         NOT NULL,
    request_at    timestamptz NOT NULL,   -- requestReceivedTimestamp
    stage_at      timestamptz NOT NULL,   -- stageTimestamp (ResponseComplete)
    received_at   timestamptz NOT NULL DEFAULT now()
);

-- The exact join (key and response RV) and the nearest one (key and time).
CREATE INDEX audit_events_rv ON audit_events (cluster, api_group, resource, namespace, name, response_rv);
CREATE INDEX audit_events_time ON audit_events (cluster, api_group, resource, namespace, name, stage_at);
-- Retention and "are events arriving".
CREATE INDEX audit_events_received_at ON audit_events (received_at);

-- How far each reader of an audit log file (audit.logFile; reader: the replica's
-- identity, the file being on its host) has stored the file's events: written in the
-- transaction that stores them.
CREATE TABLE audit_log_positions (
    cluster     text        NOT NULL,
    reader      text        NOT NULL,
    path        text        NOT NULL,
    inode       bigint      NOT NULL,   -- the file read, which a rotation's rename keeps
    "offset"    bigint      NOT NULL,   -- after the last complete line stored
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, reader, path)
);

-- abs_interval(i): i without its sign, how far apart two moments are.
CREATE FUNCTION abs_interval(i interval) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN $1 < interval '0' THEN -$1 ELSE $1 END $$;

-- The actor join knows epochs (006_epochs). After an etcd restore (or a cluster rebuilt
-- under the same name) the new history issues again the resource versions the old one
-- had, for other changes: an audit event of the old history that answered RV X on a key
-- would be joined exactly to the new history's change at RV X on that key. So an event
-- joins a change of epoch N only if it completed (stageTimestamp) after epoch N began,
-- and before epoch N+1 did.
--
-- When an epoch began: not when kube-cdc detected it (detected_at), which may be long
-- after the restore; the new history's writes in between (their events received, or
-- re-sent by the apiserver, before or after the detection) belong to it. The restore came
-- after the last change kube-cdc observed of the old history, so an epoch begins, for a
-- resource, at the newest observed_at of the resource's changes of the epochs before
-- it (at most detected_at): every old event kube-cdc saw the change of completed by
-- then, every new one after. Recorded once, when the epochs row is written, so the join
-- reads one small row. Old events whose changes kube-cdc never observed (written while it
-- was not streaming, then lost to the restore) are not told apart; nor are events if the
-- apiserver's clock and kube-cdc's differ by more than the time between kube-cdc's last
-- observation and the restore.
ALTER TABLE epochs ADD COLUMN began_after timestamptz;

CREATE FUNCTION epochs_began_after() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
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

CREATE TRIGGER epochs_began_after BEFORE INSERT ON epochs
    FOR EACH ROW EXECUTE FUNCTION epochs_began_after();

-- The epochs found before this migration.
UPDATE epochs p SET began_after = least(p.detected_at,
    (SELECT max(c.observed_at) FROM changes c
      WHERE c.cluster = p.cluster AND c.api_group = p.api_group AND c.resource = p.resource AND c.epoch < p.epoch));

-- change_actor: the actor of one change, given its columns, as the view change_actors
-- (below) defines it for every changes row. A reader that holds the change's row already
-- (history()) calls it with that row's columns and reads nothing of changes again. A SQL-standard
-- body, bound to this schema when created, so the planner inlines it into its caller's
-- query (no function call per change). deleting: the change's object carries
-- metadata.deletionTimestamp.
CREATE FUNCTION change_actor(p_cluster text, p_group text, p_resource text, p_namespace text, p_name text,
                             p_uid text, p_rv bigint, p_epoch int, p_op text, p_inferred boolean,
                             p_deleting boolean, p_observed_at timestamptz)
RETURNS TABLE (username text, impersonator text, user_agent text, audit_id text, verb text, subresource text,
               match text, distance interval, user_uid text, groups text[], source_ips text[],
               request_at timestamptz, rank int)
LANGUAGE sql STABLE
BEGIN ATOMIC
        SELECT x.* FROM (
            (SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
                    'exact'::text AS match, NULL::interval AS distance, e.user_uid, e.groups, e.source_ips,
                    e.request_at, 0 AS rank
               FROM audit_events e
              WHERE e.cluster = p_cluster AND e.api_group = p_group AND e.resource = p_resource
                AND e.namespace = p_namespace
                -- Within the change's epoch, by the apiserver's clock: completed after
                -- the epoch began and not after the next one did.
                AND e.stage_at > coalesce((SELECT max(p.began_after) FROM epochs p
                                          WHERE p_epoch > 0 AND p.cluster = p_cluster AND p.api_group = p_group
                                            AND p.resource = p_resource AND p.epoch = p_epoch), '-infinity')
                AND e.stage_at <= coalesce((SELECT min(p.began_after) FROM epochs p
                                          WHERE p.cluster = p_cluster AND p.api_group = p_group
                                            AND p.resource = p_resource AND p.epoch = p_epoch + 1), 'infinity')
                AND ((e.name = p_name AND e.response_rv = p_rv AND NOT p_inferred)
                  OR (p_op = 'delete' AND e.name = p_name AND e.verb = 'delete' AND e.response_rv IS NULL
                      AND e.response_uid = p_uid AND p_uid <> '')
                  OR (p_op = 'delete' AND e.name = '' AND e.verb = 'deletecollection' AND p_uid = ANY (e.deleted_uids)))
              ORDER BY e.request_at, e.audit_id
              LIMIT 1)
          UNION ALL
            (SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
                    'nearest'::text, abs_interval(e.stage_at - p_observed_at), e.user_uid, e.groups, e.source_ips,
                    e.request_at, 1
               FROM (SELECT ub.*,
                            -- The DELETEs that made those deletes, by the apiserver's clock.
                            (SELECT d.request_at FROM audit_events d
                              WHERE d.cluster = p_cluster AND d.api_group = p_group AND d.resource = p_resource
                                AND d.namespace = p_namespace AND d.name = p_name AND d.verb = 'delete'
                                AND d.stage_at BETWEEN ub.prev_delete_at - interval '1 minute' AND ub.prev_delete_at + interval '1 second'
                              ORDER BY abs_interval(d.stage_at - ub.prev_delete_at) LIMIT 1) AS prev_delete_request_at,
                            (SELECT d.stage_at FROM audit_events d
                              WHERE d.cluster = p_cluster AND d.api_group = p_group AND d.resource = p_resource
                                AND d.namespace = p_namespace AND d.name = p_name AND d.verb = 'delete'
                                AND d.stage_at BETWEEN ub.next_delete_at - interval '1 minute' AND ub.next_delete_at + interval '1 second'
                              ORDER BY abs_interval(d.stage_at - ub.next_delete_at) LIMIT 1) AS next_delete_stage_at
                       FROM (SELECT
                              -- The uid's lifetime on the key: after the delete of the uid
                              -- before it, before its own delete (as kube-cdc observed them).
                              (SELECT o.observed_at FROM changes o
                                WHERE o.cluster = p_cluster AND o.api_group = p_group AND o.resource = p_resource
                                  AND o.namespace = p_namespace AND o.name = p_name AND o.uid <> p_uid AND o.op = 'delete'
                                  AND o.resource_version < p_rv
                                ORDER BY o.resource_version DESC LIMIT 1) AS prev_delete_at,
                              (SELECT o.observed_at FROM changes o
                                WHERE o.cluster = p_cluster AND o.api_group = p_group AND o.resource = p_resource
                                  AND o.namespace = p_namespace AND o.name = p_name AND o.uid = p_uid AND o.op = 'delete'
                                  AND o.resource_version > p_rv
                                ORDER BY o.resource_version LIMIT 1) AS next_delete_at) ub) b
               JOIN audit_events e
                 ON e.cluster = p_cluster AND e.api_group = p_group AND e.resource = p_resource
                AND e.namespace = p_namespace AND e.name = p_name
              WHERE e.stage_at BETWEEN p_observed_at - interval '1 minute' AND p_observed_at + interval '1 minute'
                -- Within the change's epoch, by the apiserver's clock: completed after
                -- the epoch began and not after the next one did.
                AND e.stage_at > coalesce((SELECT max(p.began_after) FROM epochs p
                                          WHERE p_epoch > 0 AND p.cluster = p_cluster AND p.api_group = p_group
                                            AND p.resource = p_resource AND p.epoch = p_epoch), '-infinity')
                AND e.stage_at <= coalesce((SELECT min(p.began_after) FROM epochs p
                                          WHERE p.cluster = p_cluster AND p.api_group = p_group
                                            AND p.resource = p_resource AND p.epoch = p_epoch + 1), 'infinity')
                AND CASE p_op
                      WHEN 'create' THEN e.verb IN ('create', 'update', 'patch') AND e.response_rv IS NULL
                      WHEN 'update' THEN (e.verb IN ('update', 'patch') AND e.response_rv IS NULL)
                                      OR (e.verb = 'delete' AND (e.response_rv IS NULL OR e.response_rv > p_rv)
                                          AND p_deleting)
                      ELSE e.verb = 'delete' AND e.response_rv IS NULL AND e.response_uid = ''
                    END
                -- Never across uids: never an event naming another uid, and never one
                -- outside the uid's lifetime on the key. kube-cdc observes changes later
                -- than the apiserver answers (a burst, a loaded host), so the lifetime is
                -- bounded by the apiserver's clock where the DELETEs were audited: a write
                -- of this uid was received after the DELETE of the one before it was, and
                -- before its own DELETE completed. Where they were not, by when kube-cdc
                -- observed the deletes, which leaves out more, never less.
                AND e.object_uid IN ('', p_uid) AND e.response_uid IN ('', p_uid)
                AND (b.prev_delete_at IS NULL
                     OR CASE WHEN b.prev_delete_request_at IS NOT NULL THEN e.request_at >= b.prev_delete_request_at
                             ELSE e.stage_at > b.prev_delete_at END)
                AND (b.next_delete_at IS NULL OR e.verb = 'delete'
                     OR CASE WHEN b.next_delete_stage_at IS NOT NULL THEN e.request_at < b.next_delete_stage_at
                             ELSE e.request_at < b.next_delete_at END)
                -- A filter on the change alone, so a one-time gate: the uid's lifetime
                -- above (two reads of the key's versions) is computed only for a change
                -- that has an event of its key near it. Without it every change paid
                -- for them: history() of an object with 250 versions took 1 s at 1M
                -- rows, with no audit event at all.
                AND EXISTS (SELECT 1 FROM audit_events g
                             WHERE g.cluster = p_cluster AND g.api_group = p_group AND g.resource = p_resource
                               AND g.namespace = p_namespace AND g.name = p_name
                               AND g.stage_at BETWEEN p_observed_at - interval '1 minute' AND p_observed_at + interval '1 minute')
              -- The change's own verb before a nearer other one: a create is made by a
              -- create (a PATCH or PUT that creates is taken only where no CREATE is
              -- near), an update by an update or a patch before the DELETE that set its
              -- deletionTimestamp. kube-cdc observes a burst late, all at once, so the
              -- write after the change can lie nearer its observation than the write
              -- that made it.
              ORDER BY CASE p_op WHEN 'create' THEN e.verb <> 'create'
                                 WHEN 'update' THEN e.verb = 'delete'
                                 ELSE false END,
                       abs_interval(e.stage_at - p_observed_at), e.audit_id
              LIMIT 1)
        ) x
        -- No ORDER BY: the Append runs the exact branch first and stops at its row, so the
        -- nearest branch costs nothing where the join is exact.
        LIMIT 1;
END;

-- change_actors: one row per changes row that has an actor, joined when read, so an event
-- that arrives before its change and one that arrives after end joined alike, and neither
-- writer waits for the other.
--
-- exact: the event's response carried this change's resourceVersion on the same key (an
-- observed change, not an inferred delete); or, for a delete, the Status of a DELETE named
-- the change's uid, or a deletecollection's response listed it. A patch that changed
-- nothing answers with the RV it found, the RV of an earlier change: of the events with
-- that RV the earliest request is the one that made it (a later one found it there).
--
-- nearest: no exact event; the event closest in time (stageTimestamp against
-- observed_at, within a minute) on the same key with a verb that can make such a change,
-- whose response carried no RV (level Metadata or Request), never one naming another uid
-- or outside the uid's lifetime on the key (see below). A Pod's graceful DELETE
-- makes an update (deletionTimestamp set) before the delete: that update's nearest event
-- may be the DELETE whose response RV is the later delete's. distance is how far apart.
--
-- Each branch joins within the change's epoch (epochs.began_after above). The view ends
-- with the change's observed_at (change_observed_at): a reader that looks up one change
-- names it too, so only that change's month is read (changes is partitioned by
-- observed_at; id alone probes every month).
CREATE VIEW change_actors AS
SELECT c.id AS change_id, c.cluster, a.username, a.impersonator, a.user_agent, a.audit_id, a.verb,
       a.subresource, a.match, a.distance, a.user_uid, a.groups, a.source_ips, a.request_at,
       c.observed_at AS change_observed_at
  FROM changes c
  CROSS JOIN LATERAL change_actor(c.cluster, c.api_group, c.resource, c.namespace, c.name, c.uid, c.resource_version,
                                  c.epoch, c.op, c.inferred, c.object -> 'metadata' ? 'deletionTimestamp', c.observed_at) a;
