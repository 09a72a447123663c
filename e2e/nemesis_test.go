package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The delivery contract as a property (after CockroachDB's cdctest validator): whatever
// happens to kube-cdc, the apiserver and PostgreSQL while objects change, every write the
// apiserver acknowledged is in changes (unless a relist happened across it), each key's
// rows come in RV order, no checkpoint is ever committed ahead of a missing row, and once
// the writes stop objects equals the cluster. Each fault must be seen to take effect (a
// relist after the history expired, a retried batch after PostgreSQL restarted) and
// kube-cdc to stream again after it, with writes going on throughout.
func TestNemesisKillsRestartsAndExpiredHistoryNeverBreakTheDeliveryContract(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "n")
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, opsConfigYAML(dsn, ns, addr, ""))
	daemons := []*daemon{start(t, "run", "-c", cfg)}
	current := func() *daemon { return daemons[len(daemons)-1] }
	waitSynced(t, dsn)
	sampler := startSampler(t, dsn, ns)

	// Writers: 4 goroutines doing random creates, updates and deletes of 40 names, each
	// writer its own 10, so that after an error (the apiserver restarting) a GET tells
	// whether the write happened and the history stays complete.
	h := &history{}
	rec := h.configMaps(ns)
	wctx, stopWriters := context.WithCancel(ctx)
	var gate sync.RWMutex // writers hold it for reading while they write; a fault can pause them
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			live := map[string]*corev1.ConfigMap{}
			for wctx.Err() == nil {
				gate.RLock()
				name := fmt.Sprintf("cm-%d", w*10+r.IntN(10))
				had := live[name]
				start := time.Now()
				var op string
				var err error
				var now *corev1.ConfigMap
				switch {
				case had == nil:
					op = "create"
					now, err = rec.create(ctx, name, map[string]string{"v": "0"})
				case r.IntN(4) == 0:
					op = "delete"
					err = rec.delete(ctx, name, string(had.UID))
				default:
					op = "update"
					c := had.DeepCopy()
					c.Data["v"] = strconv.Itoa(r.IntN(1000))
					now, err = rec.update(ctx, c)
				}
				if err != nil {
					if now, err = rec.resolve(ctx, name, had, op, start); err != nil {
						gate.RUnlock()
						errs <- err
						return
					}
				}
				live[name] = now
				gate.RUnlock()
				time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
			}
		}()
	}
	defer func() {
		stopWriters()
		wg.Wait()
	}()

	metricOf := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, err := metric(addr, name, labels)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	res := map[string]string{"resource": "configmaps"}
	retryable := map[string]string{"sink": "warehouse", "class": "retryable"}
	// Between faults: 50 writes, and the checkpoint past them.
	const perFault = 50
	whileDown := func() {
		mark := h.len()
		eventually(t, 30*time.Second, func() error {
			if n := h.len() - mark; n < 20 {
				return fmt.Errorf("%d writes while kube-cdc is down", n)
			}
			return nil
		})
	}
	// "expire history" expires it under a running kube-cdc, with the writers paused: a
	// write between ExpireHistory's compaction and its apiserver restart would let the
	// restarted watch cache start at kube-cdc's own RV, and no 410 would come. "kill -9,
	// expire history" expires it while kube-cdc is down and the writers go on: the
	// restart resumes from a checkpoint the compaction passed.
	faults := []string{"kill -9", "SIGTERM", "expire history", "restart postgres", "kill -9, expire history"}
	for _, f := range faults {
		t.Logf("nemesis: %s (%d writes so far)", f, h.len())
		mark := h.len()
		switch f {
		case "kill -9":
			_ = current().cmd.Process.Kill()
			<-current().done
			whileDown()
			daemons = append(daemons, start(t, "run", "-c", cfg))
		case "SIGTERM":
			if code := current().stop(syscall.SIGTERM); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
			whileDown()
			daemons = append(daemons, start(t, "run", "-c", cfg))
		case "kill -9, expire history":
			_ = current().cmd.Process.Kill()
			<-current().done
			whileDown()
			if err := kube.ExpireHistory(ctx); err != nil {
				t.Fatal(err)
			}
			whileDown()
			daemons = append(daemons, start(t, "run", "-c", cfg))
			waitMetricAbove(t, current(), addr, "kube_cdc_gone_total", res, 0, 60*time.Second)
			waitMetricAbove(t, current(), addr, "kube_cdc_relists_total", res, 0, 60*time.Second)
		case "expire history":
			gone, relists := metricOf("kube_cdc_gone_total", res), metricOf("kube_cdc_relists_total", res)
			gate.Lock()
			err := kube.ExpireHistory(ctx)
			gate.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			waitMetricAbove(t, current(), addr, "kube_cdc_gone_total", res, gone, 60*time.Second)
			waitMetricAbove(t, current(), addr, "kube_cdc_relists_total", res, relists, 60*time.Second)
		case "restart postgres":
			failed := metricOf("kube_cdc_sink_errors_total", retryable)
			if err := pg.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			waitMetricAbove(t, current(), addr, "kube_cdc_sink_errors_total", retryable, failed, 60*time.Second)
		}
		waitCaughtUp(t, dsn, h, mark, perFault, 60*time.Second)
	}
	stopWriters()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	writes := h.all()
	t.Logf("%d writes acknowledged by the apiserver", len(writes))
	if len(writes) < len(faults)*perFault {
		t.Fatalf("%d writes, want at least %d", len(writes), len(faults)*perFault)
	}

	want := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return want })
	stillRunning(t, current())
	checkDelivered(t, dsn, ns, writes, daemons...)
	if sampler.check(t, writes, daemons...) == 0 {
		t.Errorf("no sample checked a write: the checkpoint-vs-rows property was not tested")
	}
	if n := len(relistsOf(daemons...)); n < 3 {
		t.Errorf("%d relists in the logs, want at least 3 (the first start and each expiry of the history)", n)
	}
	if code := current().stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after the final SIGTERM, want 0", code)
	}
}
