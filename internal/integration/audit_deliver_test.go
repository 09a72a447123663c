package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/audit/deliver"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The audit delivery rules (internal/audit/deliver) against the real stores: PostgreSQL's
// audit_events and the actors topic on a Kafka-protocol broker.

// auditStore is a migrated database's audit store, and a connection to look into it.
func auditStore(t *testing.T) (*auditstore.Store, *pgx.Conn) {
	t.Helper()
	dsn := pg.NewDatabase(t)
	store, err := postgres.NewAuditStore(testCtx(t), cluster, postgres.Options{DSN: dsn, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return store, conn
}

func storedAuditIDs(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, _ := conn.Query(testCtx(t), `SELECT audit_id FROM kube_cdc.audit_events ORDER BY audit_id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func auditEvent(id string, rv uint64) audit.Event {
	at := time.Now().UTC()
	return audit.Event{AuditID: id, Verb: "update", Resource: "configmaps", Namespace: "ns", Name: "cm", ResponseRV: rv,
		ResponseUID: "uid-1", Username: "alice", UserAgent: "kubectl/v1", Code: 200, RequestReceived: at, StageTimestamp: at}
}

func TestTopicFirstPutsABatchInTheActorsTopicAndPostgreSQLAndNeitherWhenTheBrokerRefusesIt(t *testing.T) {
	ctx := testCtx(t)
	store, conn := auditStore(t)
	k := testenv.NewKafka(t)
	aw, err := kafka.NewActorsWriter(cluster, "", kafka.Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })
	tf := deliver.TopicFirst{Topic: aw, Events: store, Positions: store.ForReader("replica-0")}

	if err := tf.Store(ctx, []audit.Event{auditEvent("a1", 11)}); err != nil {
		t.Fatal(err)
	}
	if err := tf.StoreAt(ctx, []audit.Event{auditEvent("a2", 12)}, "/var/log/audit.log", audit.Position{Inode: 9, Offset: 100}); err != nil {
		t.Fatal(err)
	}
	// The broker refuses the next produce: the batch is an error, and PostgreSQL (events
	// and log position alike) is left as it was, so the batch is sent again.
	fault, err := k.FailProduce(aw.Topic(), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.Store(ctx, []audit.Event{auditEvent("a3", 13)}); err == nil {
		t.Error("Store answered nil while the broker refused the actors topic's write")
	}
	if err := tf.StoreAt(ctx, []audit.Event{auditEvent("a4", 14)}, "/var/log/audit.log", audit.Position{Inode: 9, Offset: 200}); err == nil {
		t.Error("StoreAt answered nil while the broker refused the actors topic's write")
	}
	fault.Remove()

	if ids := storedAuditIDs(t, conn); fmt.Sprint(ids) != "[a1 a2]" {
		t.Errorf("audit_events holds %v, want [a1 a2]: what the topic refused is not stored", ids)
	}
	if pos, err := tf.Position(ctx, "/var/log/audit.log"); err != nil || pos.Offset != 100 {
		t.Errorf("the log position is %+v, %v; want offset 100, the last batch both stores took", pos, err)
	}
	msgs, err := k.ReadAll(ctx, aw.Topic())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		var r kafka.ActorRecord
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s rv=%s uid=%s %s", m.Key, r.AuditID, r.RV, r.UID, r.User))
	}
	if want := "[ns/cm a1 rv=11 uid=uid-1 alice ns/cm a2 rv=12 uid=uid-1 alice]"; fmt.Sprint(got) != want {
		t.Errorf("the actors topic holds %v, want %v", got, want)
	}
}

// readsCounted is the audit store with a hook after each ExactActors read.
type readsCounted struct {
	*auditstore.Store
	mu    sync.Mutex
	reads int
	after func(reads int)
}

func (r *readsCounted) ExactActors(ctx context.Context, b change.Batch) ([]*change.Actor, error) {
	a, err := r.Store.ExactActors(ctx, b)
	r.mu.Lock()
	r.reads++
	n := r.reads
	r.mu.Unlock()
	r.after(n)
	return a, err
}

func TestLookupWaitsForAnEventStoredAfterItsChangeWasRead(t *testing.T) {
	ctx := testCtx(t)
	store, _ := auditStore(t)
	// The event is stored only once the lookup has read the store and found nothing.
	late := &readsCounted{Store: store, after: func(reads int) {
		if reads == 1 {
			if err := store.Store(ctx, []audit.Event{auditEvent("late", 21)}); err != nil {
				t.Error(err)
			}
		}
	}}
	b := change.Batch{Resource: change.Resource{Resource: "configmaps", Version: "v1", Kind: "ConfigMap"},
		Changes: []change.Change{
			{Key: change.Key{Namespace: "ns", Name: "cm"}, UID: "uid-1", RV: 21, Op: change.OpUpdate},
			{Key: change.Key{Namespace: "ns", Name: "cm"}, UID: "uid-1", RV: 22, Op: change.OpUpdate, Snapshot: true},
		}}
	l := &deliver.Lookup{Store: late, Wait: 30 * time.Second, Poll: 10 * time.Millisecond}
	actors, err := l.Actors(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(actors) != 2 || actors[0] == nil || actors[0].Username != "alice" || actors[0].AuditID != "late" ||
		actors[0].Match != change.MatchExact || actors[1] != nil {
		t.Fatalf("Actors = %+v; want alice (audit ID late, exact) for the update, none for the snapshot", actors)
	}
	if late.reads < 2 {
		t.Errorf("the store was read %d times: the lookup did not wait for the late event", late.reads)
	}
}
