package kafka

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// BenchmarkWriteOfOneChange is a steady watch's batch at low rates (adaptive batching
// writes a change that finds the sink idle at once): one update of one of 100 keys,
// produced with acks=all and committed to a file store grouping commits over its default
// interval. It reports the CPU of this process per Write: the sink's, and the in-process
// broker's too (kfake runs here), so compare it only with itself.
func BenchmarkWriteOfOneChange(b *testing.B) {
	ctx := context.Background()
	k := testenv.NewKafka(b)
	store, err := checkpoint.OpenFileWith(filepath.Join(b.TempDir(), "state.db"), checkpoint.FileOptions{FlushInterval: checkpoint.DefaultFlushInterval})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(ctx, "stream", "prod", Options{Brokers: []string{k.Addr()}, CreateTopics: true}, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Checkpoint(ctx, deployments); err != nil { // creates the topic
		b.Fatal(err)
	}
	rv := change.RV(1)
	next := func() change.Batch {
		rv++
		name := "d-" + strconv.Itoa(int(rv)%100)
		c := chg(deployments, "ns", name, rv, change.OpUpdate, `{"metadata":{"name":"`+name+`","resourceVersion":"`+strconv.Itoa(int(rv))+`"},"spec":{"replicas":3}}`)
		return change.Batch{Resource: deployments, Checkpoint: rv, Changes: []change.Change{c}}
	}
	for range 200 { // warm: the connection, the keys' intents
		if err := s.Write(ctx, next()); err != nil {
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
		if err := s.Write(ctx, next()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpu()-before).Microseconds())/float64(b.N), "cpu_µs/write")
}
