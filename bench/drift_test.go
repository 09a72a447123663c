package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// BenchmarkDriftCheckPostgres: what the drift check (migration 008) costs the PostgreSQL
// sink, at 20k and 50k ConfigMaps of ~1.3 KB, all on the same table in the same run:
//   - write_s: the relist's writes (the initial sync's): every object as a snapshot
//     create through the real Sink.Write, in batches cut as the pipeline cuts them. The
//     upsert hashes each staged object once; hash_s is that work timed alone over every
//     row (jsonb_hash_extended), md5_s the same for md5(object::text), which the first
//     version of the drift check computed instead.
//   - the key index load (at every relist), median of 5 runs of the bare query:
//     keyindex_plain_s without any drift column (as before migration 008),
//     keyindex_md5_s with one md5 per row (the first version), keyindex_xmin_s as the
//     sink asks it now (only rows another transaction wrote last are hashed); then the
//     sink's KeyIndex itself (rows scanned into Go), before and after 1% of the rows
//     were edited by hand (keyindex_sink_s, keyindex_edited_s).
func BenchmarkDriftCheckPostgres(b *testing.B) {
	for _, n := range []int{20000, 50000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) { driftCheckPostgres(b, n) })
	}
}

var benchConfigMaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func driftCheckPostgres(b *testing.B, n int) {
	ctx := context.Background()
	dsn := pg.NewDatabase(b)
	s, err := postgres.New(ctx, "warehouse", "bench", postgres.Options{DSN: dsn, Migrate: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	conn := connect(b, dsn)

	// The relist's writes: n snapshot creates, batches cut as the pipeline cuts them.
	start := time.Now()
	var batch []change.Change
	bytes := 0
	flush := func(ck change.RV) {
		if err := s.Write(ctx, change.Batch{Resource: benchConfigMaps, Changes: batch, Checkpoint: ck}); err != nil {
			b.Fatal(err)
		}
		batch, bytes = batch[:0], 0
	}
	for i := range n {
		ch := driftBenchChange(i, change.RV(n+1))
		batch = append(batch, ch)
		if bytes += len(ch.Object); bytes >= pipeline.DefaultBatchBytes || len(batch) >= pipeline.DefaultBatchSize {
			flush(0)
		}
	}
	flush(change.RV(n + 1))
	write := time.Since(start)
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE kube_cdc.objects`); err != nil {
		b.Fatal(err)
	}

	md5 := median(5, func() { mustQuery(b, conn, `SELECT count(md5(object::text)) FROM kube_cdc.objects`) })
	hash := median(5, func() { mustQuery(b, conn, `SELECT count(jsonb_hash_extended(object, 0)) FROM kube_cdc.objects`) })
	const where = ` FROM kube_cdc.objects WHERE cluster = 'bench' AND api_group = '' AND resource = 'configmaps' AND deleted_at IS NULL`
	plain := median(5, func() { mustQuery(b, conn, `SELECT namespace, name, uid, resource_version, epoch`+where) })
	withMD5 := median(5, func() {
		mustQuery(b, conn, `SELECT namespace, name, uid, resource_version, epoch, md5(object::text) IS DISTINCT FROM uid`+where) // object_md5 is gone; uid stands in
	})
	withXmin := median(5, func() {
		mustQuery(b, conn, `SELECT namespace, name, uid, resource_version, epoch,
			CASE WHEN xmin::text::bigint = object_xmin THEN false ELSE jsonb_hash_extended(object, 0) IS DISTINCT FROM object_hash END`+where)
	})
	keyIndex := func() int {
		drifted := 0
		if err := s.KeyIndex(ctx, benchConfigMaps, func(_ change.Key, e change.Entry) error {
			if e.Drifted {
				drifted++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return drifted
	}
	if d := keyIndex(); d != 0 {
		b.Fatalf("%d rows as written are drifted in the key index", d)
	}
	sink := median(5, func() { keyIndex() })
	tag, err := conn.Exec(ctx, `UPDATE kube_cdc.objects SET object = jsonb_set(object, '{data,edited}', '"by hand"') WHERE name LIKE '%00'`)
	if err != nil {
		b.Fatal(err)
	}
	if d := keyIndex(); d != int(tag.RowsAffected()) {
		b.Fatalf("%d rows drifted in the key index after %d were edited by hand", d, tag.RowsAffected())
	}
	edited := median(5, func() { keyIndex() })

	b.ReportMetric(write.Seconds(), "write_s")
	b.ReportMetric(md5.Seconds(), "md5_s")
	b.ReportMetric(hash.Seconds(), "hash_s")
	b.ReportMetric(md5.Seconds()/write.Seconds(), "md5/write")
	b.ReportMetric(hash.Seconds()/write.Seconds(), "hash/write")
	b.ReportMetric(plain.Seconds(), "keyindex_plain_s")
	b.ReportMetric(withMD5.Seconds(), "keyindex_md5_s")
	b.ReportMetric(withXmin.Seconds(), "keyindex_xmin_s")
	b.ReportMetric(sink.Seconds(), "keyindex_sink_s")
	b.ReportMetric(edited.Seconds(), "keyindex_edited_s")
	b.ReportMetric(withMD5.Seconds()/plain.Seconds(), "keyindex_md5/plain")
	b.ReportMetric(withXmin.Seconds()/plain.Seconds(), "keyindex_xmin/plain")
	b.ReportMetric(0, "ns/op")
	b.Logf("drift check, %d ConfigMaps of ~1.3 KB in PostgreSQL:\n"+
		"  relist writes %v; over every row alone: md5(object::text) %v (%.1f%% of the writes), jsonb_hash_extended %v (%.1f%%)\n"+
		"  key index query: plain %v, md5 of every row %v (%.2fx), xmin then hash %v (%.2fx); sink's KeyIndex %v, with 1%% edited %v",
		n, write.Round(time.Millisecond), md5.Round(time.Millisecond), 100*md5.Seconds()/write.Seconds(),
		hash.Round(time.Millisecond), 100*hash.Seconds()/write.Seconds(),
		plain.Round(time.Millisecond), withMD5.Round(time.Millisecond), withMD5.Seconds()/plain.Seconds(),
		withXmin.Round(time.Millisecond), withXmin.Seconds()/plain.Seconds(), sink.Round(time.Millisecond), edited.Round(time.Millisecond))
}

// driftBenchChange is the i-th ConfigMap as a relist's snapshot create: ~1.3 KB of JSON.
func driftBenchChange(i int, listRV change.RV) change.Change {
	name, uid := fmt.Sprintf("cm-%06d", i), fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
	data, _ := json.Marshal(payload1K(i))
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":"%d",`+
		`"creationTimestamp":"2026-11-25T00:00:00Z","labels":{"app":"bench"}},"data":%s}`, name, syncNS, uid, i+1, data)
	return change.Change{Cluster: "bench", Resource: benchConfigMaps, Key: change.Key{Namespace: syncNS, Name: name}, UID: uid,
		RV: change.RV(i + 1), Op: change.OpCreate, Snapshot: true, ListRV: listRV, Object: json.RawMessage(obj),
		Labels: json.RawMessage(`{"app":"bench"}`), ChangedBy: "bench/Update", ObservedAt: time.Now()}
}

// median runs f k times and returns the median wall time.
func median(k int, f func()) time.Duration {
	ds := make([]time.Duration, k)
	for i := range ds {
		start := time.Now()
		f()
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[k/2]
}

// mustQuery runs q and reads every row.
func mustQuery(b *testing.B, conn *pgx.Conn, q string) {
	b.Helper()
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
}
