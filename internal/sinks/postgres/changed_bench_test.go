package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// BenchmarkStoredChangedPathsWriteCost measures what storing each watch update's changed
// paths (changes.changed, migration 017) costs a write: watch updates of ~1.2 KB
// ConfigMaps whose data and resourceVersion change at every version, written by a sink as
// built and by one configured with changedPaths: read (which stores none, as before 017),
// into fresh databases, alternating: one-change batches (the inline
// statement) and batches of 1,000 updates of 1,000 keys (the staged statements). Medians
// of the rounds; the ratio is the sink without over the sink with (≥ 1: storing costs).
// Part of `make bench`.
func BenchmarkStoredChangedPathsWriteCost(b *testing.B) {
	const rounds = 5
	for range b.N {
		var small, large [2][]time.Duration // [0] storing, [1] not
		for range rounds {
			for i, store := range []bool{true, false} {
				s := changedCostSink(b, store)
				small[i] = append(small[i], writeUpdates(b, s, 1, 600))
				large[i] = append(large[i], writeUpdates(b, s, 1000, 5))
				var stored int
				if err := s.pool.QueryRow(context.Background(), "SELECT count(changed) FROM kube_cdc.changes").Scan(&stored); err != nil {
					b.Fatal(err)
				}
				if (stored == 0) == store {
					b.Fatalf("%d rows with changed paths stored by the sink that stores them: %v", stored, store)
				}
				s.Close()
			}
		}
		med := func(d []time.Duration) time.Duration {
			d = slices.Clone(d)
			slices.Sort(d)
			return d[len(d)/2]
		}
		for _, r := range []struct {
			name string
			d    [2][]time.Duration
		}{{"one-update batch", small}, {"1,000-update batch", large}} {
			with, without := med(r.d[0]), med(r.d[1])
			fmt.Printf("bench: changed paths write cost: %-20s stored %9v, not stored %9v: %.2f× (medians of %d rounds)\n",
				r.name, with.Round(time.Microsecond), without.Round(time.Microsecond), float64(with)/float64(without), rounds)
		}
	}
}

// changedCostSink is a sink on a fresh database; without store it has changedPaths: read.
func changedCostSink(b *testing.B, store bool) *Sink {
	opts := Options{DSN: pg.NewDatabase(b), Migrate: true}
	if !store {
		opts.ChangedPaths = ChangedPathsRead
	}
	s, err := New(context.Background(), "warehouse", cluster, opts, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// writeUpdates creates keys ConfigMaps, then writes batches batches of one update of
// each, and returns the median time of a batch's Write.
func writeUpdates(b *testing.B, s *Sink, keys, batches int) time.Duration {
	ctx := context.Background()
	pad := strings.Repeat("abcdefghij", 100)
	rv := change.RV(0)
	version := func(k int, op change.Op) change.Change {
		rv++
		c := cm(fmt.Sprintf("cm-%d", k), fmt.Sprintf("uid-%d", k), rv, op)
		c.Object = json.RawMessage(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"ns",`+
			`"uid":"uid-%d","resourceVersion":"%d","labels":{"app":"a"}},"data":{"config":%q,"revision":"%d"}}`,
			k, k, rv, pad[rv%10:], rv))
		return c
	}
	var creates []change.Change
	for k := range keys {
		creates = append(creates, version(k, change.OpCreate))
	}
	if err := s.Write(ctx, batch(rv, creates...)); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for range batches {
		var cs []change.Change
		for k := range keys {
			cs = append(cs, version(k, change.OpUpdate))
		}
		start := time.Now()
		if err := s.Write(ctx, batch(rv, cs...)); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2]
}
