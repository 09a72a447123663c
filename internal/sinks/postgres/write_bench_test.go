package postgres

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// BenchmarkWriteOfOneChange is a steady watch's batch at low rates (adaptive batching
// writes a change that finds the sink idle at once): one update of one of 100 keys and
// the checkpoint. It reports this process's CPU per Write (the server's is not counted):
// the fixed per-batch cost issue 11 asks to cut.
func BenchmarkWriteOfOneChange(b *testing.B) {
	ctx := context.Background()
	s, err := New(ctx, "warehouse", cluster, Options{DSN: pg.NewDatabase(b), Migrate: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rv := change.RV(1)
	next := func() change.Change {
		rv++
		return cm("cm-"+strconv.Itoa(int(rv)%100), "uid-"+strconv.Itoa(int(rv)%100), rv, change.OpUpdate)
	}
	for range 200 { // warm: prepared statements, the keys' rows
		if err := s.Write(ctx, batch(rv+1, next())); err != nil {
			b.Fatal(err)
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	b.ResetTimer()
	for range b.N {
		if err := s.Write(ctx, batch(rv+1, next())); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpu()-before).Microseconds())/float64(b.N), "cpu_µs/write")
}
