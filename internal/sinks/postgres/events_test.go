package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

var (
	coreEvents = change.Resource{Version: "v1", Resource: "events", Kind: "Event", Namespaced: true}
	newEvents  = change.Resource{Group: "events.k8s.io", Version: "v1", Resource: "events", Kind: "Event", Namespaced: true}
)

// coreEvent is a core/v1 Event as the kubelet's recorder writes it: repeated, with a count.
func coreEvent(name, uid string, rv change.RV, count int, last string) change.Change {
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":%q,"namespace":"shop","uid":%q,"resourceVersion":"%d",
		"creationTimestamp":"2026-11-28T10:00:00Z"},
		"involvedObject":{"kind":"Pod","namespace":"shop","name":"web-1","uid":"uid-web-1","apiVersion":"v1","fieldPath":"spec.containers{app}"},
		"reason":"BackOff","message":"Back-off restarting failed container app","source":{"component":"kubelet","host":"n1"},
		"firstTimestamp":"2026-11-28T10:00:00Z","lastTimestamp":%q,"count":%d,"type":"Warning","eventTime":null,
		"reportingComponent":"","reportingInstance":""}`, name, uid, rv, last, count)
	return change.Change{Cluster: cluster, Resource: coreEvents, Key: change.Key{Namespace: "shop", Name: name}, UID: uid,
		RV: rv, Op: change.OpUpdate, Object: json.RawMessage(obj), Labels: json.RawMessage(`{}`), ObservedAt: time.Now()}
}

type eventRow struct {
	Type, Reason, Message, Group                       string
	Count                                              int
	Series                                             *int
	First, Last                                        time.Time
	InvGroup, InvKind, InvNS, InvName, InvUID, InvPath string
	InvResource                                        *string
	Component, Instance                                string
	Deleted                                            bool
}

func readEvents(t *testing.T, dsn string) map[string]eventRow {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT uid, type, reason, message, api_group, count, series_count,
			first_at, last_at, involved_api_group, involved_kind, involved_namespace, involved_name, involved_uid,
			involved_field_path, involved_resource, reporting_component, reporting_instance, deleted_at IS NOT NULL
		FROM kube_cdc.events WHERE cluster = $1`, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]eventRow{}
	for rows.Next() {
		var uid string
		var r eventRow
		if err := rows.Scan(&uid, &r.Type, &r.Reason, &r.Message, &r.Group, &r.Count, &r.Series, &r.First, &r.Last,
			&r.InvGroup, &r.InvKind, &r.InvNS, &r.InvName, &r.InvUID, &r.InvPath, &r.InvResource, &r.Component,
			&r.Instance, &r.Deleted); err != nil {
			t.Fatal(err)
		}
		out[uid] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEventsAreOneRowPerEventWithTheNewestCountAndNoVersions(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{Events: EventsOptions{Table: true, Retention: time.Hour}})
	pods := change.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}
	writeObject(t, s, pods, "shop", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1"}}`)

	// Repeats in one batch and across batches; a replayed older version last.
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 102, Changes: []change.Change{
		coreEvent("web-1.a", "ev-a", 100, 1, "2026-11-28T10:00:00Z"),
		coreEvent("web-1.a", "ev-a", 102, 3, "2026-11-28T10:02:00Z")}})
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 110, Changes: []change.Change{
		coreEvent("web-1.a", "ev-a", 110, 7, "2026-11-28T10:09:00Z")}})
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 110, Changes: []change.Change{
		coreEvent("web-1.a", "ev-a", 104, 4, "2026-11-28T10:04:00Z")}})
	// The events.k8s.io/v1 shape of another event: a series, a note, a reporting controller.
	next := change.Change{Cluster: cluster, Resource: newEvents, Key: change.Key{Namespace: "shop", Name: "web-1.b"}, UID: "ev-b",
		RV: 111, Op: change.OpCreate, Labels: json.RawMessage(`{}`), ObservedAt: time.Now(),
		Object: json.RawMessage(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"web-1.b","namespace":"shop",
			"uid":"ev-b","resourceVersion":"111","creationTimestamp":"2026-11-28T10:05:00Z"},
			"eventTime":"2026-11-28T10:05:00.000000Z","series":{"count":12,"lastObservedTime":"2026-11-28T10:08:30.500000Z"},
			"reportingController":"example.com/operator","reportingInstance":"operator-0","action":"Reconcile",
			"reason":"Failed","regarding":{"kind":"Deployment","namespace":"shop","name":"web","apiVersion":"apps/v1","uid":"uid-web"},
			"note":"reconcile failed","type":"Warning"}`)}
	write(t, s, change.Batch{Resource: newEvents, Checkpoint: 111, Changes: []change.Change{next}})

	got := readEvents(t, dsn)
	if len(got) != 2 {
		t.Fatalf("%d events rows, want 2: %+v", len(got), got)
	}
	a := got["ev-a"]
	if a.Count != 7 || a.Series != nil || a.Type != "Warning" || a.Reason != "BackOff" || a.Group != "" ||
		a.Message != "Back-off restarting failed container app" || a.Component != "kubelet" || a.Instance != "n1" ||
		!a.First.Equal(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)) || !a.Last.Equal(time.Date(2026, 11, 28, 10, 9, 0, 0, time.UTC)) ||
		a.InvKind != "Pod" || a.InvGroup != "" || a.InvNS != "shop" || a.InvName != "web-1" || a.InvUID != "uid-web-1" ||
		a.InvPath != "spec.containers{app}" || a.InvResource == nil || *a.InvResource != "pods" || a.Deleted {
		t.Errorf("the repeated core/v1 event's row: %+v (resource %v)", a, a.InvResource)
	}
	b := got["ev-b"]
	if b.Count != 1 || b.Series == nil || *b.Series != 12 || b.Message != "reconcile failed" || b.Group != "events.k8s.io" ||
		b.Component != "example.com/operator" || b.Instance != "operator-0" || b.InvGroup != "apps" || b.InvKind != "Deployment" ||
		b.InvResource != nil || !b.First.Equal(time.Date(2026, 11, 28, 10, 5, 0, 0, time.UTC)) ||
		!b.Last.Equal(time.Date(2026, 11, 28, 10, 8, 30, 500000000, time.UTC)) {
		t.Errorf("the events.k8s.io/v1 event's row: %+v (series %v)", b, b.Series)
	}
	conn := connect(t, dsn)
	var versioned int
	if err := conn.QueryRow(testCtx(t), `SELECT (SELECT count(*) FROM kube_cdc.changes WHERE resource = 'events')
			+ (SELECT count(*) FROM kube_cdc.objects WHERE resource = 'events')`).Scan(&versioned); err != nil {
		t.Fatal(err)
	}
	if versioned != 0 {
		t.Errorf("%d objects and changes rows of events, want none", versioned)
	}
	if rv, err := s.Checkpoint(testCtx(t), coreEvents); err != nil || rv != 110 {
		t.Errorf("the events checkpoint: %v, %v; want 110", rv, err)
	}

	// The apiserver deletes ev-a (its TTL): the row stays, out of the key index.
	del := coreEvent("web-1.a", "ev-a", 120, 7, "2026-11-28T10:09:00Z")
	del.Op = change.OpDelete
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 120, Changes: []change.Change{del}})
	if a := readEvents(t, dsn)["ev-a"]; !a.Deleted || a.Count != 7 {
		t.Errorf("after the apiserver's delete, ev-a's row is %+v; want kept, deleted, count 7", a)
	}
	var live []string
	if err := s.KeyIndex(testCtx(t), coreEvents, func(k change.Key, e change.Entry) error {
		live = append(live, k.Name+"@"+e.RV.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0] != "web-1.b@111" {
		t.Errorf("key index of events: %v, want [web-1.b@111]", live)
	}

	// Retention: by when kube-cdc last wrote the row.
	if n, err := s.RetainEvents(testCtx(t), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("retention an hour back deleted %d (%v), want 0", n, err)
	}
	if n, err := s.RetainEvents(testCtx(t), time.Now().Add(time.Second)); err != nil || n != 2 {
		t.Errorf("retention past every row deleted %d (%v), want 2", n, err)
	}
}

// With events.table off, events are versioned like any resource.
func TestEventsAreVersionedLikeAnyResourceWhenTheTableIsOff(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 101, Changes: []change.Change{
		coreEvent("web-1.a", "ev-a", 100, 1, "2026-11-28T10:00:00Z"), coreEvent("web-1.a", "ev-a", 101, 2, "2026-11-28T10:01:00Z")}})
	var n int
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT count(*) FROM kube_cdc.changes WHERE resource = 'events'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(readEvents(t, dsn)) != 0 {
		t.Errorf("%d changes rows and %d events rows, want 2 and 0", n, len(readEvents(t, dsn)))
	}
}

// Check asks for the events table's privileges only when run will write it: events
// streamed into their table; DELETE only with a retention.
func TestCheckAsksForTheEventsTableOnlyWhenEventsAreStreamedIntoIt(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	role, password := "events_checker_"+randomSuffix(), "pw-"+randomSuffix()
	admin := connect(t, dsn)
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(testCtx(t), fmt.Sprintf(sql, role)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE ROLE %s LOGIN PASSWORD '" + password + "'")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pg.AdminDSN())
		if err == nil {
			defer c.Close(context.Background())
			pg.TerminateBackends(context.Background(), strings.TrimPrefix(mustURL(t, dsn).Path, "/"))
			c.Exec(context.Background(), "DROP OWNED BY "+role)
			c.Exec(context.Background(), "DROP ROLE "+role)
		}
	})
	exec("GRANT USAGE ON SCHEMA kube_cdc TO %s")
	exec("GRANT SELECT ON ALL TABLES IN SCHEMA kube_cdc TO %s")
	exec("GRANT INSERT, UPDATE ON kube_cdc.objects, kube_cdc.checkpoints, kube_cdc.quarantine TO %s")
	exec("GRANT INSERT ON kube_cdc.changes TO %s")
	exec("GRANT USAGE ON SEQUENCE kube_cdc.changes_id_seq TO %s")
	u := mustURL(t, dsn)
	u.User = url.UserPassword(role, password)
	opts := Options{DSN: u.String(), Schema: "kube_cdc", MaxConns: 1, Events: EventsOptions{Table: true, Retention: time.Hour}}
	if _, err := Check(testCtx(t), "warehouse", cluster, opts, testLog(t)); err != nil {
		t.Fatalf("Check without events streamed: %v", err)
	}
	opts.StreamsEvents = true
	if _, err := Check(testCtx(t), "warehouse", cluster, opts, testLog(t)); err == nil ||
		!strings.Contains(err.Error(), "may not INSERT into kube_cdc.events, UPDATE kube_cdc.events, DELETE from kube_cdc.events") {
		t.Errorf("Check of a sink streaming events, without privileges on events: %v", err)
	}
	exec("GRANT INSERT, UPDATE ON kube_cdc.events TO %s")
	opts.Events.Retention = 0
	if _, err := Check(testCtx(t), "warehouse", cluster, opts, testLog(t)); err != nil {
		t.Errorf("Check of a sink keeping events forever, with SELECT, INSERT and UPDATE: %v", err)
	}
}

// The events upsert sends the batch as arrays; every query mode pgx may be told to use
// (a transaction-pooling pgbouncer cannot keep prepared statements) stores them alike.
func TestEventsAreStoredInEveryQueryModeOfTheDSN(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "simple_protocol", "exec", "cache_describe"} {
		t.Run("mode="+mode, func(t *testing.T) {
			dsn := pg.NewDatabase(t)
			if mode != "" {
				dsn += "&default_query_exec_mode=" + mode
				if !strings.Contains(dsn, "?") {
					dsn = strings.Replace(dsn, "&", "?", 1)
				}
			}
			s, _ := newSink(t, Options{DSN: dsn, Migrate: true, MaxConns: 1, Events: EventsOptions{Table: true}})
			write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 101, Changes: []change.Change{
				coreEvent("web-1.a", "ev-a", 100, 1, "2026-11-28T10:00:00Z"), coreEvent("web-1.a", "ev-a", 101, 2, "2026-11-28T10:01:00Z")}})
			if got := readEvents(t, dsn); len(got) != 1 || got["ev-a"].Count != 2 || got["ev-a"].Reason != "BackOff" {
				t.Errorf("events rows %+v, want ev-a with count 2", got)
			}
		})
	}
}

// Write runs the events retention in its background once the sink streams events.
func TestWriteDeletesEventsOlderThanTheirRetentionInTheBackground(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{Events: EventsOptions{Table: true, Retention: time.Millisecond}})
	old := coreEvent("web-1.a", "ev-a", 100, 1, "2026-11-28T10:00:00Z")
	old.ObservedAt = time.Now().Add(-time.Hour)
	write(t, s, change.Batch{Resource: coreEvents, Checkpoint: 100, Changes: []change.Change{old}})
	conn := connect(t, dsn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(testCtx(t), `SELECT count(*) FROM kube_cdc.events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events row observed an hour ago outlived a retention of 1ms by 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
