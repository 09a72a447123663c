package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	sinktest.Run(t, sinktest.Harness{
		Cluster:          cluster,
		ExactlyOnce:      true,
		Transactional:    true,
		RemembersDeletes: true,
		New: func(t *testing.T) sinktest.Target {
			dsn := migrated.NewDatabase(t)
			return sinktest.Target{
				Open: func(t *testing.T) sinktest.Sink {
					s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: true}, testLog(t))
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return s
				},
				Records: func(t *testing.T, res change.Resource) []sinktest.Record {
					rows, err := connect(t, dsn).Query(testCtx(t), `SELECT namespace, name, resource_version, op
						FROM kube_cdc.changes WHERE cluster = $1 AND api_group = $2 AND resource = $3 ORDER BY id`,
						cluster, res.Group, res.Resource)
					if err != nil {
						t.Fatal(err)
					}
					recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sinktest.Record, error) {
						var r sinktest.Record
						err := row.Scan(&r.Key.Namespace, &r.Key.Name, &r.RV, &r.Op)
						return r, err
					})
					if err != nil {
						t.Fatal(err)
					}
					return recs
				},
				// The changes insert fails at the batch's middle change: the objects upsert
				// and the changes rows before it are done by then, and must be undone.
				Break: func(t *testing.T, b change.Batch) func() {
					mid := b.Changes[len(b.Changes)/2]
					conn := connect(t, dsn)
					if _, err := conn.Exec(testCtx(t), `
						CREATE FUNCTION kube_cdc.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
						BEGIN
							IF NEW.name = TG_ARGV[0] AND NEW.resource_version = TG_ARGV[1]::bigint THEN
								RAISE EXCEPTION 'refused';
							END IF;
							RETURN NEW;
						END $$`); err != nil {
						t.Fatal(err)
					}
					if _, err := conn.Exec(testCtx(t), `CREATE TRIGGER refuse BEFORE INSERT ON kube_cdc.changes
						FOR EACH ROW EXECUTE FUNCTION kube_cdc.refuse(`+
						`'`+mid.Key.Name+`', '`+mid.RV.String()+`')`); err != nil {
						t.Fatal(err)
					}
					return func() {
						if _, err := conn.Exec(testCtx(t), `DROP TRIGGER refuse ON kube_cdc.changes; DROP FUNCTION kube_cdc.refuse()`); err != nil {
							t.Fatal(err)
						}
					}
				},
			}
		},
	})
}
