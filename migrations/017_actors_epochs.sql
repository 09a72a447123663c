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

-- change_actors as in 014_actors, each branch within the change's epoch, and with the
-- change's observed_at (change_observed_at): a reader that looks up one change names it
-- too, so only that change's month is read (changes is partitioned by observed_at; id
-- alone probes every month).
CREATE OR REPLACE VIEW change_actors AS
SELECT c.id AS change_id, c.cluster, a.username, a.impersonator, a.user_agent, a.audit_id, a.verb,
       a.subresource, a.match, a.distance, a.user_uid, a.groups, a.source_ips, a.request_at,
       c.observed_at AS change_observed_at
  FROM changes c
  CROSS JOIN LATERAL (
        SELECT x.* FROM (
            (SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
                    'exact'::text AS match, NULL::interval AS distance, e.user_uid, e.groups, e.source_ips,
                    e.request_at, 0 AS rank
               FROM audit_events e
              WHERE e.cluster = c.cluster AND e.api_group = c.api_group AND e.resource = c.resource
                AND e.namespace = c.namespace
                -- Within the change's epoch, by the apiserver's clock: completed after
                -- the epoch began and not after the next one did.
                AND e.stage_at > coalesce((SELECT max(p.began_after) FROM epochs p
                                          WHERE c.epoch > 0 AND p.cluster = c.cluster AND p.api_group = c.api_group
                                            AND p.resource = c.resource AND p.epoch = c.epoch), '-infinity')
                AND e.stage_at <= coalesce((SELECT min(p.began_after) FROM epochs p
                                          WHERE p.cluster = c.cluster AND p.api_group = c.api_group
                                            AND p.resource = c.resource AND p.epoch = c.epoch + 1), 'infinity')
                AND ((e.name = c.name AND e.response_rv = c.resource_version AND NOT c.inferred)
                  OR (c.op = 'delete' AND e.name = c.name AND e.verb = 'delete' AND e.response_rv IS NULL
                      AND e.response_uid = c.uid AND c.uid <> '')
                  OR (c.op = 'delete' AND e.name = '' AND e.verb = 'deletecollection' AND c.uid = ANY (e.deleted_uids)))
              ORDER BY e.request_at, e.audit_id
              LIMIT 1)
          UNION ALL
            (SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
                    'nearest'::text, abs_interval(e.stage_at - c.observed_at), e.user_uid, e.groups, e.source_ips,
                    e.request_at, 1
               FROM (SELECT ub.*,
                            -- The DELETEs that made those deletes, by the apiserver's clock.
                            (SELECT d.request_at FROM audit_events d
                              WHERE d.cluster = c.cluster AND d.api_group = c.api_group AND d.resource = c.resource
                                AND d.namespace = c.namespace AND d.name = c.name AND d.verb = 'delete'
                                AND d.stage_at BETWEEN ub.prev_delete_at - interval '1 minute' AND ub.prev_delete_at + interval '1 second'
                              ORDER BY abs_interval(d.stage_at - ub.prev_delete_at) LIMIT 1) AS prev_delete_request_at,
                            (SELECT d.stage_at FROM audit_events d
                              WHERE d.cluster = c.cluster AND d.api_group = c.api_group AND d.resource = c.resource
                                AND d.namespace = c.namespace AND d.name = c.name AND d.verb = 'delete'
                                AND d.stage_at BETWEEN ub.next_delete_at - interval '1 minute' AND ub.next_delete_at + interval '1 second'
                              ORDER BY abs_interval(d.stage_at - ub.next_delete_at) LIMIT 1) AS next_delete_stage_at
                       FROM (SELECT
                              -- The uid's lifetime on the key: after the delete of the uid
                              -- before it, before its own delete (as kube-cdc observed them).
                              (SELECT o.observed_at FROM changes o
                                WHERE o.cluster = c.cluster AND o.api_group = c.api_group AND o.resource = c.resource
                                  AND o.namespace = c.namespace AND o.name = c.name AND o.uid <> c.uid AND o.op = 'delete'
                                  AND o.resource_version < c.resource_version
                                ORDER BY o.resource_version DESC LIMIT 1) AS prev_delete_at,
                              (SELECT o.observed_at FROM changes o
                                WHERE o.cluster = c.cluster AND o.api_group = c.api_group AND o.resource = c.resource
                                  AND o.namespace = c.namespace AND o.name = c.name AND o.uid = c.uid AND o.op = 'delete'
                                  AND o.resource_version > c.resource_version
                                ORDER BY o.resource_version LIMIT 1) AS next_delete_at) ub) b
               JOIN audit_events e
                 ON e.cluster = c.cluster AND e.api_group = c.api_group AND e.resource = c.resource
                AND e.namespace = c.namespace AND e.name = c.name
              WHERE e.stage_at BETWEEN c.observed_at - interval '1 minute' AND c.observed_at + interval '1 minute'
                -- Within the change's epoch, by the apiserver's clock: completed after
                -- the epoch began and not after the next one did.
                AND e.stage_at > coalesce((SELECT max(p.began_after) FROM epochs p
                                          WHERE c.epoch > 0 AND p.cluster = c.cluster AND p.api_group = c.api_group
                                            AND p.resource = c.resource AND p.epoch = c.epoch), '-infinity')
                AND e.stage_at <= coalesce((SELECT min(p.began_after) FROM epochs p
                                          WHERE p.cluster = c.cluster AND p.api_group = c.api_group
                                            AND p.resource = c.resource AND p.epoch = c.epoch + 1), 'infinity')
                AND CASE c.op
                      WHEN 'create' THEN e.verb IN ('create', 'update', 'patch') AND e.response_rv IS NULL
                      WHEN 'update' THEN (e.verb IN ('update', 'patch') AND e.response_rv IS NULL)
                                      OR (e.verb = 'delete' AND (e.response_rv IS NULL OR e.response_rv > c.resource_version)
                                          AND c.object -> 'metadata' ? 'deletionTimestamp')
                      ELSE e.verb = 'delete' AND e.response_rv IS NULL AND e.response_uid = ''
                    END
                -- Never across uids: never an event naming another uid, and never one
                -- outside the uid's lifetime on the key. kube-cdc observes changes later
                -- than the apiserver answers (a burst, a loaded host), so the lifetime is
                -- bounded by the apiserver's clock where the DELETEs were audited: a write
                -- of this uid was received after the DELETE of the one before it was, and
                -- before its own DELETE completed. Where they were not, by when kube-cdc
                -- observed the deletes, which leaves out more, never less.
                AND e.object_uid IN ('', c.uid) AND e.response_uid IN ('', c.uid)
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
                             WHERE g.cluster = c.cluster AND g.api_group = c.api_group AND g.resource = c.resource
                               AND g.namespace = c.namespace AND g.name = c.name
                               AND g.stage_at BETWEEN c.observed_at - interval '1 minute' AND c.observed_at + interval '1 minute')
              -- The change's own verb before a nearer other one: a create is made by a
              -- create (a PATCH or PUT that creates is taken only where no CREATE is
              -- near), an update by an update or a patch before the DELETE that set its
              -- deletionTimestamp. kube-cdc observes a burst late, all at once, so the
              -- write after the change can lie nearer its observation than the write
              -- that made it.
              ORDER BY CASE c.op WHEN 'create' THEN e.verb <> 'create'
                                 WHEN 'update' THEN e.verb = 'delete'
                                 ELSE false END,
                       abs_interval(e.stage_at - c.observed_at), e.audit_id
              LIMIT 1)
        ) x
        -- No ORDER BY: the Append runs the exact branch first and stops at its row, so the
        -- nearest branch costs nothing where the join is exact.
        LIMIT 1
  ) a;

-- history() as in 014_actors, looking each version's actor up in its own month only.
CREATE OR REPLACE FUNCTION history(resource text, namespace text, name text, cluster text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster text, observed_at timestamptz, op text, rv bigint, uid text,
               changed_by text, inferred boolean, reason text, snapshot boolean, changed text[],
               username text, impersonator text, user_agent text, match text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$
SELECT h.id, h.cluster, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, h.reason,
       h.snapshot,
       CASE WHEN h.object IS NOT NULL
            THEN array_remove(changed_paths(coalesce(h.previous, '{}'), h.object), '/metadata/resourceVersion')
       END,
       a.username, a.impersonator, a.user_agent, a.match
  FROM (SELECT c.id, c.cluster, c.observed_at, c.op, c.resource_version, c.uid, c.changed_by, c.inferred,
               c.reason, c.snapshot, c.object,
               CASE WHEN lag(c.op) OVER w <> 'delete' AND (lag(c.uid) OVER w = c.uid OR '' IN (c.uid, lag(c.uid) OVER w))
                    THEN lag(c.object) OVER w END AS previous
          FROM changes c
         WHERE c.resource = split_part($1, '.', 1)
           AND c.api_group = CASE WHEN strpos($1, '.') > 0 THEN substr($1, strpos($1, '.') + 1) ELSE '' END
           AND c.namespace = $2 AND c.name = $3
           AND c.cluster = ANY (CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                                     ELSE ARRAY[$4] END)
        WINDOW w AS (PARTITION BY c.cluster ORDER BY c.id)) h
  -- Per version, LIMIT 1: the view is evaluated for this object's rows only.
  LEFT JOIN LATERAL (SELECT x.username, x.impersonator, x.user_agent, x.match FROM change_actors x
                      WHERE x.change_id = h.id
                        AND x.change_observed_at = h.observed_at LIMIT 1) a ON true
 ORDER BY h.id
$$;
