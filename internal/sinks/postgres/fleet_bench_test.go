package postgres

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
)

// BenchmarkFleetWrites is one cluster's steady writes (batches of 20 updates of ~1 KB
// ConfigMaps, the checkpoint with each) into a schema alone, and then while two other
// clusters write the same way into it: a fleet in one database. Every sink takes its
// writer lock as run does. It reports the first cluster's changes per second and the
// lock waits seen between the writers (pg_locks rows not granted, sampled every 10 ms,
// advisory and row locks alike, logged by kind): a lock one cluster holds against
// another would show there; what remains is the database's own cost of three writers on
// one server.
func BenchmarkFleetWrites(b *testing.B) {
	for _, others := range []int{0, 2} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			dsn := pg.NewDatabase(b)
			open := func(cluster string) *Sink {
				s, err := New(ctx, "warehouse", cluster, Options{DSN: dsn, Migrate: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
				if err != nil {
					b.Fatal(err)
				}
				if err := s.ClaimWriter(ctx, writerlock.OrRefuse); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}
			const size, keys = 20, 500
			writer := func(s *Sink, cluster string) func() error {
				rv := change.RV(1)
				return func() error {
					cs := make([]change.Change, size)
					for i := range cs {
						rv++
						name := fmt.Sprintf("cm-%d", int(rv)%keys)
						c := cm(name, "uid-"+name, rv, change.OpUpdate)
						c.Cluster = cluster
						cs[i] = c
					}
					return s.Write(ctx, change.Batch{Resource: configmaps, Changes: cs, Checkpoint: rv})
				}
			}
			main := open(cluster)
			write := writer(main, cluster)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var otherBatches atomic.Int64
			for i := range others {
				name := fmt.Sprintf("other-%d", i)
				s := open(name)
				w := writer(s, name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := w(); err != nil {
							b.Error(err)
							return
						}
						otherBatches.Add(1)
					}
				}()
			}
			var waits atomic.Int64
			var kindsMu sync.Mutex
			kinds := map[string]int{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					rows, err := main.pool.Query(ctx, `SELECT locktype || ' ' || mode || coalesce(' ' || relation::regclass::text, '') FROM pg_locks WHERE NOT granted`)
					if err != nil {
						continue
					}
					for rows.Next() {
						var kind string
						if rows.Scan(&kind) == nil {
							waits.Add(1)
							kindsMu.Lock()
							kinds[kind]++
							kindsMu.Unlock()
						}
					}
					rows.Close()
				}
			}()
			for range 20 { // warm
				if err := write(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := write(); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(b.N*size)/elapsed.Seconds(), "changes/s")
			b.ReportMetric(float64(otherBatches.Load()*size)/elapsed.Seconds(), "others_changes/s")
			b.ReportMetric(float64(waits.Load()), "lock_waits_seen")
			if len(kinds) > 0 {
				b.Logf("lock waits seen: %v", kinds)
			}
		})
	}
}
