-- change_actor, readable: the same join as 014_actors defined, in the same 12 parameters
-- and the same result, with each rule written once and named:
--
--   epoch_window  when the change's epoch began and the next one did, by the apiserver's
--                 clock (014_actors: epochs.began_after);
--   exact_actor   the exact rule, which the Kafka and stdout sinks also apply as they
--                 write a change (the audit store's ExactActors reads this function);
--   change_actor  the exact actor, else the nearest (its rules below), each branch
--                 within epoch_window.
--
-- Each is a SQL-standard body the planner inlines into its caller's query, so the plan is
-- the one 014_actors's single body had, node for node (docs/benchmarks.md, "Who made each
-- change"). A helper called with an argument that is itself a subquery is not inlined
-- (a Function Scan, run per call): the nearest branch's DELETE lookups, whose bound is
-- the uid's lifetime read from changes, stay written in place for that reason.
-- CREATE OR REPLACE keeps change_actor's identity: the view change_actors and history()
-- call it unchanged.

-- epoch_window: one row, (began, ended): an event joins a change of epoch p_epoch only if
-- it completed (stage_at) after began and not after ended (014_actors explains why).
CREATE FUNCTION epoch_window(p_cluster text, p_group text, p_resource text, p_epoch int)
RETURNS TABLE (began timestamptz, ended timestamptz)
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT coalesce((SELECT max(p.began_after) FROM epochs p
                      WHERE p_epoch > 0 AND p.cluster = p_cluster AND p.api_group = p_group
                        AND p.resource = p_resource AND p.epoch = p_epoch), '-infinity'),
           coalesce((SELECT min(p.began_after) FROM epochs p
                      WHERE p.cluster = p_cluster AND p.api_group = p_group
                        AND p.resource = p_resource AND p.epoch = p_epoch + 1), 'infinity');
END;

-- exact_actor: the event whose response carried this change's resourceVersion on the same
-- key (an observed change, not an inferred delete); or, for a delete, the Status of a
-- DELETE that named the change's uid, or a deletecollection's response that listed it.
-- A patch that changed nothing answers with the RV it found, the RV of an earlier change:
-- of the events with that RV the earliest request is the one that made it. At most one
-- row; within the change's epoch.
CREATE FUNCTION exact_actor(p_cluster text, p_group text, p_resource text, p_namespace text, p_name text,
                            p_uid text, p_rv bigint, p_epoch int, p_op text, p_inferred boolean)
RETURNS TABLE (username text, impersonator text, user_agent text, audit_id text, verb text, subresource text,
               match text, distance interval, user_uid text, groups text[], source_ips text[],
               request_at timestamptz, rank int)
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
           'exact'::text, NULL::interval, e.user_uid, e.groups, e.source_ips, e.request_at, 0
      FROM epoch_window(p_cluster, p_group, p_resource, p_epoch) w
      JOIN audit_events e
        ON e.cluster = p_cluster AND e.api_group = p_group AND e.resource = p_resource
       AND e.namespace = p_namespace
     WHERE e.stage_at > w.began AND e.stage_at <= w.ended
       AND ((e.name = p_name AND e.response_rv = p_rv AND NOT p_inferred)
         OR (p_op = 'delete' AND e.name = p_name AND e.verb = 'delete' AND e.response_rv IS NULL
             AND e.response_uid = p_uid AND p_uid <> '')
         OR (p_op = 'delete' AND e.name = '' AND e.verb = 'deletecollection' AND p_uid = ANY (e.deleted_uids)))
     ORDER BY e.request_at, e.audit_id
     LIMIT 1;
END;

-- change_actor: as 014_actors describes it (and the view change_actors above it). The
-- nearest branch: no exact event; the event closest in time (stage_at against
-- p_observed_at, within a minute) on the same key with a verb that can make such a change,
-- whose response carried no RV, never one naming another uid or outside the uid's
-- lifetime on the key; within the change's epoch.
CREATE OR REPLACE FUNCTION change_actor(p_cluster text, p_group text, p_resource text, p_namespace text, p_name text,
                                        p_uid text, p_rv bigint, p_epoch int, p_op text, p_inferred boolean,
                                        p_deleting boolean, p_observed_at timestamptz)
RETURNS TABLE (username text, impersonator text, user_agent text, audit_id text, verb text, subresource text,
               match text, distance interval, user_uid text, groups text[], source_ips text[],
               request_at timestamptz, rank int)
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT x.* FROM (
        (SELECT * FROM exact_actor(p_cluster, p_group, p_resource, p_namespace, p_name, p_uid, p_rv, p_epoch,
                                   p_op, p_inferred))
      UNION ALL
        (SELECT e.username, e.impersonator, e.user_agent, e.audit_id, e.verb, e.subresource,
                'nearest'::text, abs_interval(e.stage_at - p_observed_at), e.user_uid, e.groups, e.source_ips,
                e.request_at, 1
           FROM (SELECT life.*,
                        -- The DELETEs that made those deletes, by the apiserver's clock.
                        (SELECT d.request_at FROM audit_events d
                          WHERE d.cluster = p_cluster AND d.api_group = p_group AND d.resource = p_resource
                            AND d.namespace = p_namespace AND d.name = p_name AND d.verb = 'delete'
                            AND d.stage_at BETWEEN life.prev_delete_at - interval '1 minute' AND life.prev_delete_at + interval '1 second'
                          ORDER BY abs_interval(d.stage_at - life.prev_delete_at) LIMIT 1) AS prev_delete_request_at,
                        (SELECT d.stage_at FROM audit_events d
                          WHERE d.cluster = p_cluster AND d.api_group = p_group AND d.resource = p_resource
                            AND d.namespace = p_namespace AND d.name = p_name AND d.verb = 'delete'
                            AND d.stage_at BETWEEN life.next_delete_at - interval '1 minute' AND life.next_delete_at + interval '1 second'
                          ORDER BY abs_interval(d.stage_at - life.next_delete_at) LIMIT 1) AS next_delete_stage_at
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
                            ORDER BY o.resource_version LIMIT 1) AS next_delete_at) life) b
          CROSS JOIN epoch_window(p_cluster, p_group, p_resource, p_epoch) w
           JOIN audit_events e
             ON e.cluster = p_cluster AND e.api_group = p_group AND e.resource = p_resource
            AND e.namespace = p_namespace AND e.name = p_name
          WHERE e.stage_at BETWEEN p_observed_at - interval '1 minute' AND p_observed_at + interval '1 minute'
            AND e.stage_at > w.began AND e.stage_at <= w.ended
            AND CASE p_op
                  WHEN 'create' THEN e.verb IN ('create', 'update', 'patch') AND e.response_rv IS NULL
                  WHEN 'update' THEN (e.verb IN ('update', 'patch') AND e.response_rv IS NULL)
                                  OR (e.verb = 'delete' AND (e.response_rv IS NULL OR e.response_rv > p_rv)
                                      AND p_deleting)
                  ELSE e.verb = 'delete' AND e.response_rv IS NULL AND e.response_uid = ''
                END
            -- Never across uids: never an event naming another uid, and never one outside
            -- the uid's lifetime on the key. kube-cdc observes changes later than the
            -- apiserver answers (a burst, a loaded host), so the lifetime is bounded by the
            -- apiserver's clock where the DELETEs were audited: a write of this uid was
            -- received after the DELETE of the one before it was, and before its own DELETE
            -- completed. Where they were not, by when kube-cdc observed the deletes, which
            -- leaves out more, never less.
            AND e.object_uid IN ('', p_uid) AND e.response_uid IN ('', p_uid)
            AND (b.prev_delete_at IS NULL
                 OR CASE WHEN b.prev_delete_request_at IS NOT NULL THEN e.request_at >= b.prev_delete_request_at
                         ELSE e.stage_at > b.prev_delete_at END)
            AND (b.next_delete_at IS NULL OR e.verb = 'delete'
                 OR CASE WHEN b.next_delete_stage_at IS NOT NULL THEN e.request_at < b.next_delete_stage_at
                         ELSE e.request_at < b.next_delete_at END)
            -- A filter on the change alone, so a one-time gate: the uid's lifetime above
            -- (two reads of the key's versions) is computed only for a change that has an
            -- event of its key near it (014_actors: without it, history() of an object with
            -- 250 versions took 1 s at 1M rows, with no audit event at all).
            AND EXISTS (SELECT 1 FROM audit_events g
                         WHERE g.cluster = p_cluster AND g.api_group = p_group AND g.resource = p_resource
                           AND g.namespace = p_namespace AND g.name = p_name
                           AND g.stage_at BETWEEN p_observed_at - interval '1 minute' AND p_observed_at + interval '1 minute')
          -- The change's own verb before a nearer other one: a create is made by a create
          -- (a PATCH or PUT that creates is taken only where no CREATE is near), an update
          -- by an update or a patch before the DELETE that set its deletionTimestamp.
          -- kube-cdc observes a burst late, all at once, so the write after the change can
          -- lie nearer its observation than the write that made it.
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
