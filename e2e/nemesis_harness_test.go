package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// What the nemesis tests share (TestNemesisKills… and, behind the soak build tag,
// TestSoak): writers whose every acknowledged write is recorded, and the faults.

// writerPool is goroutines doing random creates, updates and deletes of ConfigMaps of one
// namespace, each of its own names, so that after an error (the apiserver restarting) a
// GET tells whether the write happened and the history stays complete.
type writerPool struct {
	// Gate: writers hold it for reading while they write; a fault can pause them.
	Gate sync.RWMutex
	// restores is bumped after an etcd restore took writes away: each writer then reads
	// back what the cluster holds of its names before it writes again.
	restores atomic.Int32
	stop     context.CancelFunc
	wg       sync.WaitGroup
	errs     chan error
}

// startWriters starts n writers on rec's namespace; writer w writes the names cm-(w*10)
// to cm-(w*10+9), with a random source seeded by (w, seed).
func startWriters(ctx context.Context, rec recorder, n int, seed uint64) *writerPool {
	p := &writerPool{errs: make(chan error, n)}
	wctx, stop := context.WithCancel(ctx)
	p.stop = stop
	for w := range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), seed))
			live := map[string]*corev1.ConfigMap{}
			seen := int32(0)
			for wctx.Err() == nil {
				p.Gate.RLock()
				if k := p.restores.Load(); k != seen {
					seen = k
					if err := readBack(ctx, rec, w, live); err != nil {
						p.Gate.RUnlock()
						p.errs <- err
						return
					}
				}
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
						p.Gate.RUnlock()
						p.errs <- err
						return
					}
				}
				live[name] = now
				p.Gate.RUnlock()
				time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
			}
		}()
	}
	return p
}

// readBack reads what the cluster holds of writer w's names into live.
func readBack(ctx context.Context, rec recorder, w int, live map[string]*corev1.ConfigMap) error {
	for i := range 10 {
		name := fmt.Sprintf("cm-%d", w*10+i)
		c, err := rec.h.cms(rec.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			delete(live, name)
		case err != nil:
			return fmt.Errorf("read back %s after a restore: %w", name, err)
		default:
			live[name] = c
		}
	}
	return nil
}

// halt stops the writers, waits for them and returns their errors.
func (p *writerPool) halt() []error {
	p.stop()
	p.wg.Wait()
	var out []error
	for {
		select {
		case err := <-p.errs:
			out = append(out, err)
		default:
			return out
		}
	}
}

// nemesis is one kube-cdc (run -c cfg, metrics on addr) on a control plane of its own,
// and the faults done to it. daemons is every process started, the current one last.
type nemesis struct {
	t       *testing.T
	kube    *testenv.Kube
	cfg     string
	addr    string
	daemons []*daemon
	// writes counts the writes acknowledged so far (all namespaces).
	writes func() int
}

func (n *nemesis) current() *daemon { return n.daemons[len(n.daemons)-1] }

func (n *nemesis) restart() { n.daemons = append(n.daemons, start(n.t, "run", "-c", n.cfg)) }

// whileDown waits until 20 more writes were acknowledged.
func (n *nemesis) whileDown() {
	n.t.Helper()
	mark := n.writes()
	eventually(n.t, 30*time.Second, func() error {
		if k := n.writes() - mark; k < 20 {
			return fmt.Errorf("%d writes while kube-cdc is down", k)
		}
		return nil
	})
}

func (n *nemesis) metric(name string, labels map[string]string) float64 {
	n.t.Helper()
	v, err := metric(n.addr, name, labels)
	if err != nil {
		n.t.Fatalf("%s: %v", name, err)
	}
	return v
}

func (n *nemesis) waitMetricAbove(name string, labels map[string]string, floor float64) {
	n.t.Helper()
	waitMetricAbove(n.t, n.current(), n.addr, name, labels, floor, 60*time.Second)
}

var configMapsRes = map[string]string{"resource": "configmaps"}

// kill9 kills kube-cdc, lets the writers write and starts it again.
func (n *nemesis) kill9() {
	n.t.Helper()
	_ = n.current().cmd.Process.Kill()
	<-n.current().done
	n.whileDown()
	n.restart()
}

// sigterm stops kube-cdc, which must exit 0, lets the writers write and starts it again.
func (n *nemesis) sigterm() {
	n.t.Helper()
	if code := n.current().stop(syscall.SIGTERM); code != 0 {
		n.t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	n.whileDown()
	n.restart()
}

// killExpire kills kube-cdc and expires the history while it is down and the writers go
// on: the restart resumes from a checkpoint the compaction passed, and must relist.
func (n *nemesis) killExpire() {
	n.t.Helper()
	_ = n.current().cmd.Process.Kill()
	<-n.current().done
	n.whileDown()
	if err := n.kube.ExpireHistory(context.Background()); err != nil {
		n.t.Fatal(err)
	}
	n.whileDown()
	n.restart()
	n.waitMetricAbove("kube_cdc_gone_total", configMapsRes, 0)
	n.waitMetricAbove("kube_cdc_relists_total", configMapsRes, 0)
}

// expireHistory expires the history under a running kube-cdc with the writers paused (a
// write between ExpireHistory's compaction and its apiserver restart would let the
// restarted watch cache start at kube-cdc's own RV, and no 410 would come), and waits for
// the 410 and the relist.
func (n *nemesis) expireHistory(pools ...*writerPool) {
	n.t.Helper()
	gone, relists := n.metric("kube_cdc_gone_total", configMapsRes), n.metric("kube_cdc_relists_total", configMapsRes)
	for _, p := range pools {
		p.Gate.Lock()
	}
	err := n.kube.ExpireHistory(context.Background())
	for _, p := range pools {
		p.Gate.Unlock()
	}
	if err != nil {
		n.t.Fatal(err)
	}
	n.waitMetricAbove("kube_cdc_gone_total", configMapsRes, gone)
	n.waitMetricAbove("kube_cdc_relists_total", configMapsRes, relists)
}

// restartPostgres restarts pg and waits until the sink named sink retried a failed batch.
func (n *nemesis) restartPostgres(pg *testenv.Postgres, sink string) {
	n.t.Helper()
	retryable := map[string]string{"sink": sink, "class": "retryable"}
	failed := n.metric("kube_cdc_sink_errors_total", retryable)
	if err := pg.Restart(context.Background()); err != nil {
		n.t.Fatal(err)
	}
	n.waitMetricAbove("kube_cdc_sink_errors_total", retryable, failed)
}
