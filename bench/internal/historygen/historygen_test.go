package historygen

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func TestGenerateFillsTheRealSchemaOverEveryClusterAndMonthAndKeepsItsIndexes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.NewPostgres(t).NewDatabase(t)
	if _, err := schema.Migrate(ctx, dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var before int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = 'kube_cdc' AND tablename = 'changes'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	res, err := Generate(ctx, conn, "kube_cdc", Options{Rows: 6000, Namespaces: 4, ObjectsPerNamespace: 50, AuditedNamespaces: 1})
	if err != nil {
		t.Fatal(err)
	}
	var rows, clusters, months, maxVersions, indexes, inDefault int
	var minSize, maxSize int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT cluster), count(DISTINCT date_trunc('month', observed_at, 'UTC')),
			min(pg_column_size(object)), max(pg_column_size(object))
		FROM kube_cdc.changes`).Scan(&rows, &clusters, &months, &minSize, &maxSize); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM kube_cdc.changes_default),
			(SELECT count(*) FROM pg_indexes x JOIN pg_index i ON i.indexrelid = to_regclass('kube_cdc.' || x.indexname)
			  WHERE x.schemaname = 'kube_cdc' AND x.tablename = 'changes' AND i.indisvalid),
			(SELECT count(*) FROM kube_cdc.objects o JOIN LATERAL (SELECT max(resource_version) AS rv FROM kube_cdc.changes c
				WHERE c.cluster = o.cluster AND c.namespace = o.namespace AND c.name = o.name) c ON c.rv = o.resource_version)`).
		Scan(&inDefault, &indexes, &maxVersions); err != nil {
		t.Fatal(err)
	}
	if rows != 6000 || clusters != 3 || months < 12 || inDefault != 0 {
		t.Errorf("generated %d rows over %d clusters and %d months, %d in the default partition; want 6000 over 3 and 12 (or 13), none",
			rows, clusters, months, inDefault)
	}
	if before < 4 || indexes != before || len(res.Indexes) != before {
		t.Logf("rebuilt %v", res.Indexes)
		t.Errorf("changes has %d valid indexes after the load, want its %d back", indexes, before)
	}
	if maxVersions != res.Objects || res.Objects != 600 {
		t.Errorf("%d of %d objects rows hold their key's newest changes version; want all of 600", maxVersions, res.Objects)
	}
	if minSize < 1000 || maxSize > 2000 {
		t.Errorf("objects of %d–%d bytes, want about 1.2 KB", minSize, maxSize)
	}
	// Every update carries the changed paths the sink would have stored (migration 017):
	// changed_paths against the key's previous version, in its order; creates none.
	var updates, stored, wrong int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE op = 'update'), count(changed),
			count(*) FILTER (WHERE changed IS DISTINCT FROM CASE WHEN op = 'update' THEN kube_cdc.changed_paths(previous, object) END)
		  FROM (SELECT op, object, changed, lag(object) OVER (PARTITION BY cluster, namespace, name ORDER BY id) AS previous
		          FROM kube_cdc.changes) c`).Scan(&updates, &stored, &wrong); err != nil {
		t.Fatal(err)
	}
	// The audited namespace's changes are each joined exactly to their own event.
	var audited, exact, events int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE a.match = 'exact' AND a.audit_id = 'audit-' || c.resource_version),
			(SELECT count(*) FROM kube_cdc.audit_events)
		  FROM kube_cdc.changes c LEFT JOIN LATERAL (SELECT x.match, x.audit_id FROM kube_cdc.change_actors x
		         WHERE x.change_id = c.id AND x.change_observed_at = c.observed_at LIMIT 1) a ON true
		 WHERE c.cluster = 'cluster-0' AND c.namespace = 'ns-0'`).Scan(&audited, &exact, &events); err != nil {
		t.Fatal(err)
	}
	if audited < 300 || exact != audited || events != audited || res.AuditEvents != events {
		t.Errorf("%d changes in the audited namespace, %d joined exactly to their event; %d events stored (%d generated); want all the same",
			audited, exact, events, res.AuditEvents)
	}
	if updates < 5000 || stored != updates || wrong != 0 {
		t.Errorf("%d updates, %d with changed paths stored, %d of the rows with other paths than changed_paths'; want all of them, none",
			updates, stored, wrong)
	}
}
