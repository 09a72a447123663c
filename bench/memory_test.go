package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/jackc/pgx/v5"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// ProfileEnv names a file: when set, BenchmarkRelistMemory writes a CPU profile of the
// in-process initial sync of the 20k ConfigMaps there (go tool pprof -top FILE).
const ProfileEnv = "KUBE_CDC_BENCH_CPUPROFILE"

// HeapProfileEnv names a directory: when set, the relist heap measurements write the heap
// profile taken at their live peak there (go tool pprof -sample_index=inuse_space), one
// file per measurement, and the cluster benchmark the profile of the streaming heap.
const HeapProfileEnv = "KUBE_CDC_BENCH_HEAPPROFILE"

// heapSampler samples the Go heap every 50 ms: the live heap after a forced GC every
// other sample, and the heap including not-yet-collected garbage on every sample.
type heapSampler struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	livePeak uint64
	allPeak  uint64
	profile  string // where to write the heap profile of the live peak; "" for none
	profErr  error
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func liveHeap() uint64 {
	runtime.GC()
	return heapObjects()
}

// startHeapSampler starts sampling. With HeapProfileEnv set and name not empty, the heap
// profile of each new live peak is written to that directory as name.pb.gz.
func startHeapSampler(name string) *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	if dir := os.Getenv(HeapProfileEnv); dir != "" && name != "" {
		h.profile = filepath.Join(dir, name+".pb.gz")
	}
	h.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			h.allPeak = max(h.allPeak, heapObjects())
			if i%2 == 0 {
				h.sampleLive()
			}
		}
	})
	return h
}

// sampleLive forces a GC and keeps the live heap if it is a new peak, with its profile.
func (h *heapSampler) sampleLive() {
	live := liveHeap()
	if live <= h.livePeak {
		return
	}
	h.livePeak = live
	if h.profile == "" || h.profErr != nil {
		return
	}
	// The heap profile is as of the GC liveHeap just forced: this very peak.
	f, err := os.Create(h.profile)
	if err == nil {
		err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
	}
	h.profErr = err
}

// finish stops sampling; it fails b when the peak's profile could not be written.
func (h *heapSampler) finish(b testing.TB) {
	close(h.stop)
	h.wg.Wait()
	h.sampleLive()
	if h.profErr != nil {
		b.Errorf("heap profile %s: %v", h.profile, h.profErr)
	} else if h.profile != "" {
		b.Logf("heap profile of the live peak: %s", h.profile)
	}
}

// inProcess runs the pipeline the way cmd/kube-cdc/run.go wires it, in this process, until
// cancel; done is closed when Run returned.
type inProcess struct {
	cancel context.CancelFunc
	done   chan error
}

func startInProcess(b *testing.B, dsn string, namespaces []string) *inProcess {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rc := rest.CopyConfig(kube.Config)
	rc.Timeout = time.Minute
	clients, err := source.NewClients(rc, source.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	targets, err := source.Resolve(clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: namespaces}})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sink, err := postgres.New(ctx, "warehouse", "bench", postgres.Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		b.Fatal(err)
	}
	// Several namespaces resolve to one target each, as in the daemon.
	pts := make([]pipeline.Target, len(targets))
	for i, t := range targets {
		pts[i] = targetOf(t, func() *source.Stream {
			return &source.Stream{Clients: clients, Target: t, Transform: &source.Transform{RedactSecrets: true}, Log: log}
		})
	}
	p := pipeline.New(pipeline.Options{Cluster: "bench", Log: log}, []pipeline.Sink{sink}, pts)
	ip := &inProcess{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := p.Run(ctx)
		sink.Close()
		ip.done <- err
	}()
	return ip
}

func (ip *inProcess) stop(b *testing.B) {
	b.Helper()
	ip.cancel()
	if err := <-ip.done; err != nil {
		b.Errorf("pipeline: %v", err)
	}
}

// BenchmarkRelistMemory: Go heap per object held during a relist (reconcile diff against
// a sink that already holds every object, so the whole key index is loaded), at 20k and
// 100k objects, with the pipeline running in this process.
func BenchmarkRelistMemory(b *testing.B) {
	syncFixture(b)
	var perObj20k float64
	var peak20k uint64
	for _, c := range []struct {
		name string
		ns   []string
		n    int
	}{
		{"objects=20k", []string{syncNS}, syncObjs},
		{"objects=100k", []string{syncNS, extraNS}, syncObjs + extraObjs},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.n > syncObjs {
				extraFixture(b)
			}
			dsn := pg.NewDatabase(b)
			conn := connect(b, dsn)
			ctx := context.Background()

			// 1. Initial sync into an empty database (profiled on request).
			base0 := liveHeap()
			if f := os.Getenv(ProfileEnv); f != "" && c.n == syncObjs {
				out, err := os.Create(f)
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(out); err != nil {
					b.Fatal(err)
				}
				defer func() {
					pprof.StopCPUProfile()
					out.Close()
					b.Logf("CPU profile of the in-process initial sync: %s", f)
				}()
			}
			h0 := startHeapSampler("")
			start := time.Now()
			ip := startInProcess(b, dsn, c.ns)
			waitSynced(b, conn, "", c.n, 10*time.Minute, nil)
			waitCheckpoints(b, conn, len(c.ns), 10*time.Minute)
			syncTime := time.Since(start)
			h0.finish(b)
			ip.stop(b)
			if f := os.Getenv(ProfileEnv); f != "" && c.n == syncObjs {
				pprof.StopCPUProfile()
			}

			// 2. Forget the checkpoint: the next start relists and diffs against the sink.
			if _, err := conn.Exec(ctx, `DELETE FROM kube_cdc.checkpoints`); err != nil {
				b.Fatal(err)
			}
			var changes0, changes1 int64
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes`).Scan(&changes0); err != nil {
				b.Fatal(err)
			}
			base := liveHeap()
			h := startHeapSampler(fmt.Sprintf("relist-configmaps-%d", c.n))
			start = time.Now()
			ip = startInProcess(b, dsn, c.ns)
			waitSynced(b, conn, "", c.n, 10*time.Minute, nil)
			waitCheckpoints(b, conn, len(c.ns), 10*time.Minute)
			relistTime := time.Since(start)
			h.finish(b)
			ip.stop(b)
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes`).Scan(&changes1); err != nil {
				b.Fatal(err)
			}
			if changes1 != changes0 {
				b.Errorf("the relist of an unchanged cluster wrote %d changes, want 0", changes1-changes0)
			}

			perObj := float64(h.livePeak-min(base, h.livePeak)) / float64(c.n)
			initPerObj := float64(h0.livePeak-min(base0, h0.livePeak)) / float64(c.n)
			b.ReportMetric(float64(base)/(1<<20), "baseline_MiB")
			b.ReportMetric(float64(h.livePeak)/(1<<20), "relist_live_peak_MiB")
			b.ReportMetric(float64(h.allPeak)/(1<<20), "relist_peak_incl_garbage_MiB")
			b.ReportMetric(perObj, "relist_B/obj")
			b.ReportMetric(initPerObj, "initial_sync_B/obj")
			b.ReportMetric(perObj/512, "relist_B/obj/target")
			b.ReportMetric(0, "ns/op")
			b.Logf("relist of %d objects against a sink holding them (full key index): heap baseline %.1f MiB, live peak %.1f MiB (incl. garbage %.1f MiB) → %.0f B/object (target <= 512: %s); relist took %v, wrote %d changes. Initial sync (%v): live peak %.1f MiB over a baseline of %.1f MiB → %.0f B/object",
				c.n, float64(base)/(1<<20), float64(h.livePeak)/(1<<20), float64(h.allPeak)/(1<<20), perObj, verdict(perObj <= 512),
				relistTime.Round(time.Millisecond), changes1-changes0,
				syncTime.Round(time.Millisecond), float64(h0.livePeak)/(1<<20), float64(base0)/(1<<20), initPerObj)
			if c.n == syncObjs {
				perObj20k, peak20k = perObj, h.livePeak
			} else if peak20k > 0 {
				slope := float64(h.livePeak-min(peak20k, h.livePeak)) / float64(c.n-syncObjs)
				b.ReportMetric(slope, "marginal_B/obj_20k_to_100k")
				b.Logf("marginal heap per object between the 20k and 100k relists: %.0f B/object (20k: %.0f B/object including fixed buffers)", slope, perObj20k)
			}
		})
	}
}

// waitCheckpoints waits until n scopes (one per namespace) have a checkpoint: every
// namespace's relist has ended.
func waitCheckpoints(b *testing.B, conn *pgx.Conn, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var got int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource = 'configmaps'`).Scan(&got)
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d scopes checkpointed within %v (%v)", got, n, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// steadyHeap is the live heap now; with HeapProfileEnv set, its profile is written there
// as name.pb.gz.
func steadyHeap(b testing.TB, name string) uint64 {
	h := &heapSampler{}
	if dir := os.Getenv(HeapProfileEnv); dir != "" {
		h.profile = filepath.Join(dir, name+".pb.gz")
	}
	h.sampleLive()
	if h.profErr != nil {
		b.Errorf("heap profile %s: %v", h.profile, h.profErr)
	}
	return h.livePeak
}
