package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// DefaultEventsRetention is sinks[].postgres.events.retention's default: the apiserver
// keeps events an hour (--event-ttl), the events table a day.
const DefaultEventsRetention = 24 * time.Hour

// EventsOptions is sinks[].postgres.events: how Kubernetes Events are stored.
type EventsOptions struct {
	// Table stores each Kubernetes Event (core/v1 events and events.k8s.io/v1 events) as
	// one row of the events table (migration 019), updated in place as it repeats (count,
	// series, last time), and never as objects and changes rows: no version, no diff. An
	// event the apiserver deletes (its TTL) keeps its row, marked deleted_at, until
	// Retention. false versions events like any other resource. Default true (the config
	// layer's: a false here is an explicit choice).
	Table bool `koanf:"table"`
	// Retention deletes the events rows kube-cdc last wrote longer ago than this, every
	// minute, whatever the changes retention. 0 keeps them forever. Default
	// DefaultEventsRetention (24h).
	Retention time.Duration `koanf:"retention"`
}

// isEvents reports whether res is Kubernetes Events, through either API.
func isEvents(res change.Resource) bool {
	return res.Resource == "events" && (res.Group == "" || res.Group == "events.k8s.io")
}

// storesEvents reports whether the sink writes res to the events table.
func (s *Sink) storesEvents(res change.Resource) bool { return s.opts.Events.Table && isEvents(res) }

// eventsUpkeep paces the events retention: at most one run at a time, every
// schema.RetentionEvery, and only once the sink streams events (a sink that does not needs no
// privilege on the table, and Check asks for none).
type eventsUpkeep struct {
	streams atomic.Bool // an events resource's key index was read or a batch written
	busy    atomic.Bool
	last    atomic.Int64 // unix nanoseconds
}

type eventsStatements struct {
	upsert, markDeleted, keyIndex, newest, retain string
}

func newEventsStatements(schema string) eventsStatements {
	s := pgx.Identifier{schema}.Sanitize()
	return eventsStatements{
		// $1 cluster, $2 the API's group, then one array per column of the batch's
		// events: $3 uid, $4 RV, $5 epoch, $6 object (jsonb, the source's bytes as they
		// are), $7 observed at. The
		// newest version of each uid moves its row, only upwards in (epoch, RV): a replay
		// or a relist of an unchanged event writes nothing. Fields are read where either
		// API puts them (core/v1, then events.k8s.io/v1). A repeat from the apiserver
		// (after its delete, the same uid again) clears deleted_at.
		upsert: fmt.Sprintf(`INSERT INTO %[1]s.events AS e (cluster, uid, api_group, namespace, name, resource_version, epoch,
				type, reason, message, action, count, series_count, first_at, last_at,
				involved_api_group, involved_kind, involved_resource, involved_namespace, involved_name, involved_uid,
				involved_field_path, reporting_component, reporting_instance, observed_at)
			SELECT $1, b.uid, $2, coalesce(b.o #>> '{metadata,namespace}', ''), coalesce(b.o #>> '{metadata,name}', ''),
			       b.rv, b.epoch,
			       coalesce(b.o ->> 'type', ''), coalesce(b.o ->> 'reason', ''), coalesce(b.o ->> 'message', b.o ->> 'note', ''),
			       coalesce(b.o ->> 'action', ''),
			       coalesce(CASE WHEN jsonb_typeof(b.o -> 'count') = 'number' THEN (b.o ->> 'count')::numeric::int END,
			                CASE WHEN jsonb_typeof(b.o -> 'deprecatedCount') = 'number' THEN (b.o ->> 'deprecatedCount')::numeric::int END,
			                1),
			       CASE WHEN jsonb_typeof(b.o #> '{series,count}') = 'number' THEN (b.o #>> '{series,count}')::numeric::int END,
			       coalesce(t.first, t.event, t.created),
			       coalesce(greatest(t.series, t.last, t.event), t.first, t.created),
			       CASE WHEN strpos(i.inv ->> 'apiVersion', '/') > 0 THEN split_part(i.inv ->> 'apiVersion', '/', 1) ELSE '' END,
			       coalesce(i.inv ->> 'kind', ''),
			       CASE WHEN coalesce(i.inv ->> 'uid', '') <> '' THEN
			            (SELECT r.resource FROM %[1]s.objects r
			              WHERE r.cluster = $1 AND r.uid = i.inv ->> 'uid' AND r.deleted_at IS NULL LIMIT 1) END,
			       coalesce(i.inv ->> 'namespace', ''), coalesce(i.inv ->> 'name', ''), coalesce(i.inv ->> 'uid', ''),
			       coalesce(i.inv ->> 'fieldPath', ''),
			       coalesce(nullif(b.o ->> 'reportingComponent', ''), nullif(b.o ->> 'reportingController', ''),
			                nullif(b.o #>> '{source,component}', ''), b.o #>> '{deprecatedSource,component}', ''),
			       coalesce(nullif(b.o ->> 'reportingInstance', ''), nullif(b.o #>> '{source,host}', ''),
			                b.o #>> '{deprecatedSource,host}', ''),
			       b.observed
			  FROM (SELECT DISTINCT ON (x.uid) x.uid, x.rv, x.epoch, x.o, x.observed
			          FROM unnest($3::text[], $4::bigint[], $5::int[], $6::jsonb[], $7::timestamptz[]) AS x(uid, rv, epoch, o, observed)
			         ORDER BY x.uid, x.epoch DESC, x.rv DESC) b
			 CROSS JOIN LATERAL (SELECT coalesce(b.o -> 'involvedObject', b.o -> 'regarding', '{}'::jsonb)) AS i(inv)
			 CROSS JOIN LATERAL (SELECT nullif(coalesce(b.o ->> 'firstTimestamp', b.o ->> 'deprecatedFirstTimestamp'), '')::timestamptz,
			                            nullif(coalesce(b.o ->> 'lastTimestamp', b.o ->> 'deprecatedLastTimestamp'), '')::timestamptz,
			                            nullif(b.o ->> 'eventTime', '')::timestamptz,
			                            nullif(b.o #>> '{series,lastObservedTime}', '')::timestamptz,
			                            nullif(b.o #>> '{metadata,creationTimestamp}', '')::timestamptz)
			       AS t(first, last, event, series, created)
			ON CONFLICT (cluster, uid) DO UPDATE SET
				api_group = excluded.api_group, namespace = excluded.namespace, name = excluded.name,
				resource_version = excluded.resource_version, epoch = excluded.epoch,
				type = excluded.type, reason = excluded.reason, message = excluded.message, action = excluded.action,
				count = excluded.count, series_count = excluded.series_count,
				first_at = excluded.first_at, last_at = excluded.last_at,
				involved_api_group = excluded.involved_api_group, involved_kind = excluded.involved_kind,
				involved_resource = coalesce(excluded.involved_resource, e.involved_resource),
				involved_namespace = excluded.involved_namespace, involved_name = excluded.involved_name,
				involved_uid = excluded.involved_uid, involved_field_path = excluded.involved_field_path,
				reporting_component = excluded.reporting_component, reporting_instance = excluded.reporting_instance,
				observed_at = excluded.observed_at, deleted_at = NULL
			 WHERE (e.epoch, e.resource_version) < (excluded.epoch, excluded.resource_version)`, s),
		// $1 cluster, $2 uids, $3 when. The apiserver deleted them (observed, or inferred by
		// a relist): the rows stay until retention.
		markDeleted: fmt.Sprintf(`UPDATE %s.events SET deleted_at = $3
			WHERE cluster = $1 AND uid = ANY ($2::text[]) AND deleted_at IS NULL`, s),
		// Both APIs show the same events: either's key index is every live row.
		keyIndex: fmt.Sprintf(`SELECT namespace, name, uid, resource_version, epoch, false FROM %s.events
			WHERE cluster = $1 AND deleted_at IS NULL`, s),
		newest: fmt.Sprintf(`SELECT namespace, name, uid, resource_version, epoch, deleted_at IS NOT NULL, false
			FROM %s.events WHERE cluster = $1 ORDER BY epoch DESC, resource_version DESC LIMIT $2`, s),
		// $1 cluster, $2 cutoff, $3 chunk.
		retain: fmt.Sprintf(`DELETE FROM %[1]s.events WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM %[1]s.events WHERE cluster = $1 AND observed_at < $2 LIMIT $3))`, s),
	}
}

// eventsChunk is how many events rows one retention statement deletes.
const eventsChunk = 5000

// writeEvents writes a batch of Events to the events table: the newest version of each
// uid upserted, the deleted ones marked, quarantined changes and the checkpoint, in one
// implicit transaction (one pipelined round trip, as writeSmall).
func (s *Sink) writeEvents(ctx context.Context, w *batchWrite) error {
	s.eventsUpkeep.streams.Store(true)
	var (
		uids      []string
		objects   []json.RawMessage
		rvs       []int64
		epochs    []int32
		observed  []time.Time
		deleted   []string
		deletedAt time.Time
	)
	for i := range w.staged {
		c := &w.staged[i]
		if c.Op == change.OpDelete {
			deleted = append(deleted, c.UID)
			deletedAt = c.ObservedAt
			continue
		}
		if c.Object == nil {
			continue
		}
		uids = append(uids, c.UID)
		rvs = append(rvs, int64(c.RV))
		epochs = append(epochs, int32(c.Epoch))
		objects = append(objects, c.Object)
		observed = append(observed, c.ObservedAt)
	}
	batch := &pgx.Batch{}
	if len(uids) > 0 {
		batch.Queue(s.events.upsert, s.cluster, w.res.Group, uids, rvs, epochs, objects, observed)
	}
	if len(deleted) > 0 {
		if deletedAt.IsZero() {
			deletedAt = time.Now()
		}
		batch.Queue(s.events.markDeleted, s.cluster, deleted, deletedAt)
	}
	var plan []statement
	for i := range w.bad {
		plan = append(plan, statement{sql: s.sql.quarantine, args: quarantineArgs(s.cluster, w.res, &w.bad[i]), bad: &w.bad[i]})
	}
	if w.travel != nil {
		plan = append(plan, s.epochStatement(w))
	}
	if w.savesCheckpoint() {
		plan = append(plan, s.checkpointStatement(w))
	}
	for _, st := range plan {
		batch.Queue(st.sql, st.args...)
	}
	if batch.Len() == 0 {
		return nil
	}
	br := s.pool.SendBatch(ctx, batch)
	for range batch.Len() - len(plan) {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	for _, st := range plan {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if st.bad != nil {
			st.bad.inserted = tag.RowsAffected() == 1
		}
	}
	return br.Close()
}

// eventsKeyIndex is KeyIndex of an events resource the sink stores in the events table:
// its live rows, so that a relist writes only the events that changed and marks deleted
// those the apiserver dropped meanwhile.
func (s *Sink) eventsKeyIndex(ctx context.Context, res change.Resource, fn func(change.Key, change.Entry) error) error {
	s.eventsUpkeep.streams.Store(true)
	rows, err := s.pool.Query(ctx, s.events.keyIndex, s.cluster)
	if err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	defer rows.Close()
	var (
		key change.Key
		e   change.Entry
	)
	for rows.Next() {
		var epoch int32
		if err := rows.Scan(&key.Namespace, &key.Name, &e.UID, &e.RV, &epoch, &e.Drifted); err != nil {
			return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
		}
		e.Epoch = int(epoch)
		if err := fn(key, e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the key index of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return nil
}

// eventsNewest is Newest of an events resource stored in the events table.
func (s *Sink) eventsNewest(ctx context.Context, res change.Resource, n int) ([]change.Held, error) {
	rows, err := s.pool.Query(ctx, s.events.newest, s.cluster, n)
	if err != nil {
		return nil, fmt.Errorf("read the newest rows of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change.Held, error) {
		var h change.Held
		var epoch int32
		err := row.Scan(&h.Key.Namespace, &h.Key.Name, &h.UID, &h.RV, &epoch, &h.Deleted, &h.Inferred)
		h.Epoch = int(epoch)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the newest rows of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return out, nil
}

// maybeRetainEvents starts, in the background of Write and at most every
// schema.RetentionEvery, the deletion of the events rows older than opts.Events.Retention
// (RetainEvents), never two at a time, once the sink streams events.
func (s *Sink) maybeRetainEvents() {
	if !s.opts.Events.Table || s.opts.Events.Retention <= 0 || !s.eventsUpkeep.streams.Load() {
		return
	}
	now := time.Now()
	if now.UnixNano()-s.eventsUpkeep.last.Load() < int64(schema.RetentionEvery) || !s.eventsUpkeep.busy.CompareAndSwap(false, true) {
		return
	}
	s.eventsUpkeep.last.Store(now.UnixNano())
	s.upkeep.Background(func(ctx context.Context) {
		defer s.eventsUpkeep.busy.Store(false)
		n, err := s.RetainEvents(ctx, now.Add(-s.opts.Events.Retention))
		if err != nil && ctx.Err() == nil {
			s.log.Warn("retention: delete old events", "sink", s.name, "error", err)
			return
		}
		if n > 0 {
			s.log.Info("retention: removed old events", "sink", s.name, "rows", n)
		}
	})
}

// RetainEvents deletes the cluster's events rows kube-cdc last wrote before cutoff, a
// chunk at a time, and returns how many it deleted.
func (s *Sink) RetainEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.events.retain, s.cluster, cutoff, eventsChunk)
		if err != nil {
			return total, fmt.Errorf("delete events before %s: %w", cutoff.Format(time.RFC3339), pgdb.Classify(err, s.password))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < eventsChunk {
			return total, nil
		}
	}
}
