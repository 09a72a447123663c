package postgres

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
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

// BenchmarkWriteOfARelistBatch is an initial sync's batch: 3,200 snapshots of new ~1 KB
// ConfigMaps (the pipeline cuts relist batches at about that many), written with no
// checkpoint as a relist's batches are. It reports the wall time per change: at an initial
// sync the sink, PostgreSQL's time above all, is the bottleneck (docs/benchmarks.md).
// With -v the sink logs at debug level to stderr: its "wrote batch" lines give each
// step's time (COPY into the stage, objects, changes, commit).
func BenchmarkWriteOfARelistBatch(b *testing.B) {
	const size = 3200
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(ctx, "warehouse", cluster, Options{DSN: pg.NewDatabase(b), Migrate: true}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pad := strings.Repeat("x", 900)
	rv := change.RV(1)
	next := func() change.Batch {
		cs := make([]change.Change, size)
		for i := range cs {
			rv++
			name := "cm-" + strconv.Itoa(int(rv))
			c := cm(name, "uid-"+name, rv, change.OpCreate)
			c.Object = append(c.Object[:len(c.Object)-2:len(c.Object)-2], []byte(`,"pad":"`+pad+`"}}`)...)
			c.Snapshot, c.ListRV = true, 1<<40
			cs[i] = c
		}
		return change.Batch{Resource: configmaps, Changes: cs}
	}
	if err := s.Write(ctx, next()); err != nil { // warm: the stage, the statements
		b.Fatal(err)
	}
	var wall time.Duration
	for range b.N {
		bt := next()
		start := time.Now()
		if err := s.Write(ctx, bt); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
	}
	b.ReportMetric(float64(wall.Microseconds())/float64(b.N*size), "µs/change")
}
