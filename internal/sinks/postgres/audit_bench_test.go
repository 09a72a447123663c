package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/audit"
)

// BenchmarkChangeActors measures the join the view change_actors does when read, on
// 100,000 changes of 10,000 ConfigMaps (10 versions each) with an audit event each: 80%
// exact (the response RV), 20% Metadata-level (nearest). Run once, small:
//
//	go test -run XXX -bench ChangeActors -benchtime 20x ./internal/sinks/postgres/
func BenchmarkChangeActors(b *testing.B) {
	ctx := context.Background()
	dsn := pg.NewDatabase(b)
	store, err := NewAuditStore(ctx, cluster, Options{DSN: dsn, Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 := time.Now().Add(-time.Hour).UTC()
	if _, err := db.Exec(ctx, `
		INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, observed_at)
		SELECT $1, '', 'configmaps', 'ns', 'cm-' || (i / 10), 'uid-' || (i / 10), 1000 + i,
		       CASE WHEN i % 10 = 0 THEN 'create' ELSE 'update' END, '{"metadata":{}}', $2::timestamptz + i * interval '10 ms'
		  FROM generate_series(0, 99999) i`, cluster, t0); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO kube_cdc.audit_events (audit_id, cluster, verb, api_group, resource, namespace, name, response_rv,
		       response_uid, username, code, request_at, stage_at)
		SELECT 'a-' || i, $1, CASE WHEN i % 10 = 0 THEN 'create' ELSE 'update' END, '', 'configmaps', 'ns', 'cm-' || (i / 10),
		       CASE WHEN i % 5 <> 4 THEN 1000 + i END, CASE WHEN i % 5 <> 4 THEN 'uid-' || (i / 10) ELSE '' END,
		       'user-' || (i % 7), 200, $2::timestamptz + i * interval '10 ms' - interval '3 ms', $2::timestamptz + i * interval '10 ms' - interval '1 ms'
		  FROM generate_series(0, 99999) i`, cluster, t0); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version)
		VALUES ($1, 'warehouse', '', 'configmaps', 101000)`, cluster); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE kube_cdc.changes; ANALYZE kube_cdc.audit_events`); err != nil {
		b.Fatal(err)
	}
	b.Run("history of one object (10 versions)", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			var n int
			if err := db.QueryRow(ctx, `SELECT count(username) FROM kube_cdc.history('configmaps', 'ns', $1)`,
				fmt.Sprintf("cm-%d", i%10000)).Scan(&n); err != nil || n != 10 {
				b.Fatalf("%d actors, %v", n, err)
			}
		}
	})
	b.Run("actors of 1,000 changes", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			var n int
			lo := int64(i%99) * 1000
			if err := db.QueryRow(ctx, `SELECT count(a.username) FROM kube_cdc.changes c
				JOIN kube_cdc.change_actors a ON a.change_id = c.id WHERE c.id > $1 AND c.id <= $1 + 1000`, lo).Scan(&n); err != nil || n != 1000 {
				b.Fatalf("%d actors, %v", n, err)
			}
		}
	})
	b.Run("store a batch of 400 events", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			events := make([]audit.Event, 400)
			for j := range events {
				events[j] = audit.Event{AuditID: fmt.Sprintf("b-%d-%d", i, j), Verb: "update", Resource: "configmaps", Namespace: "ns",
					Name: "x", Username: "u", Code: 200, ResponseRV: uint64(j + 1), RequestReceived: t0, StageTimestamp: t0}
			}
			if err := store.Store(ctx, events); err != nil {
				b.Fatal(err)
			}
		}
	})
}
