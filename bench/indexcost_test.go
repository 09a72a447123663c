package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/bench/internal/historygen"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// changesSchemas are the index sets of changes the write-cost benchmark compares: each is
// the schema of the migrations before stop ("" for every one).
var changesSchemas = []struct{ name, stop string }{
	{"unpartitioned (010)", "012_partitions"},
	{"partitioned, 012's indexes", "013_asof_relations"},
	{"partitioned, 015's indexes", "016_changes_indexes"},
	{"partitioned, every migration", ""},
}

// BenchmarkChangesWriteCost measures what changes' indexes cost a write: the relist batch
// of BenchmarkHistoryRelistWrite and a steady stream of one-change batches (200/s, the
// sink's inline path) into a fresh schema of each of changesSchemas, alternating; each
// figure is the median over the rounds, and its ratio is against the unpartitioned table
// as it was at migration 010 (its primary key, changes_once and changes_cluster_observed_at).
func BenchmarkChangesWriteCost(b *testing.B) {
	for range b.N {
		relist := make([][]time.Duration, len(changesSchemas))
		stream := make([][]time.Duration, len(changesSchemas))
		for range historyRelistRounds {
			for i, s := range changesSchemas {
				relist[i] = append(relist[i], relistBefore(b, s.stop))
				stream[i] = append(stream[i], pct(streamBefore(b, s.stop), 50))
			}
		}
		for i, s := range changesSchemas {
			r, w := pct(relist[i], 50), pct(stream[i], 50)
			fmt.Printf("bench: changes write cost: %-30s relist of 20,000 %8v (throughput %.2f×), one-change batch p50 %8v (%.2f×)\n",
				s.name, r.Round(time.Millisecond), float64(pct(relist[0], 50))/float64(r),
				w.Round(10*time.Microsecond), float64(pct(stream[0], 50))/float64(w))
		}
		fmt.Printf("bench: changes write cost: medians of %d rounds; load average %s\n", historyRelistRounds, loadavg())
	}
}

// streamBefore writes one change every 5 ms for 3 s into a fresh schema of the
// migrations before stop and returns each Write's latency.
func streamBefore(b *testing.B, stop string) []time.Duration {
	ctx := context.Background()
	dsn := pg.NewDatabase(b)
	if stop != "" {
		migrateBefore(b, dsn, stop)
	}
	sink, err := postgres.New(ctx, "warehouse", historygen.Cluster(0), postgres.Options{DSN: dsn, Migrate: stop == ""}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	return steadyWrites(b, sink, 3*time.Second, nil)
}
