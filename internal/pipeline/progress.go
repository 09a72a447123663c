package pipeline

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// DefaultProgressInterval spaces the progress lines of a relist (Options.ProgressInterval).
const DefaultProgressInterval = 5 * time.Second

// relistProgress is one cursor's account of the relist under way, for the lines a user
// watches during an initial sync: every ProgressInterval (the first only once a relist
// has taken that long) one "relisting" line with the objects listed and written so far,
// the rate and, where the LIST said how many remain (change.Event.ListTotal), an estimate
// of the time left; then one "synced" line when the relist's checkpoint is written.
//
// The reconcile diff calls begin and listed in the cursor's goroutine; the write
// goroutine calls wrote: hence the mutex.
type relistProgress struct {
	p   *Pipeline
	log *slog.Logger

	mu      sync.Mutex
	active  bool      // between RelistBegin and the write of the relist's checkpoint
	start   time.Time // of the relist
	logged  time.Time // the last progress line, or start
	listed  int
	total   int // estimate of the objects of the whole relist; 0 unknown
	written int // changes of this relist the sink acknowledged
}

// progressInterval is Options.ProgressInterval or its default.
func (p *Pipeline) progressInterval() time.Duration {
	if p.opts.ProgressInterval > 0 {
		return p.opts.ProgressInterval
	}
	return DefaultProgressInterval
}

// begin starts the account of a relist, once the writes before it are done, so that
// every write from here on is this relist's.
func (r *relistProgress) begin() {
	now := r.p.opts.Clock.Now()
	r.mu.Lock()
	r.active, r.start, r.logged = true, now, now
	r.listed, r.total, r.written = 0, 0, 0
	r.p.synced.relisting()
	line := r.due(now)
	r.mu.Unlock()
	if line != nil {
		r.log.Info("relisting", line...)
	}
}

// count counts one listed object; total is the LIST's estimate (change.Event.ListTotal).
func (r *relistProgress) count(total int) {
	now := r.p.opts.Clock.Now()
	r.mu.Lock()
	r.listed++
	r.total = total
	line := r.due(now)
	r.mu.Unlock()
	if line != nil {
		r.log.Info("relisting", line...)
	}
}

// due returns the attributes of a progress line when one is due, else nil. r.mu is held.
func (r *relistProgress) due(now time.Time) []any {
	if !r.active || now.Sub(r.logged) < r.p.progressInterval() {
		return nil
	}
	r.logged = now
	took := now.Sub(r.start)
	rate := float64(r.listed) / took.Seconds()
	attrs := []any{"listed", r.listed, "written", r.written, "rate", fmt.Sprintf("%.0f/s", rate), "took", took.Round(time.Second).String()}
	if r.total > r.listed && rate > 0 {
		left := r.total - r.listed
		attrs = append(attrs, "remaining", left, "eta", time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String())
	}
	return attrs
}

// wrote counts the changes of batch b, which the sink acknowledged; relisting says b
// was cut during the relist (the cursor held the key index). The first batch cut after
// the relist ended carries its checkpoint: the resource is synced into this sink.
func (r *relistProgress) wrote(b change.Batch, relisting bool) {
	now := r.p.opts.Clock.Now()
	r.mu.Lock()
	if !r.active {
		r.mu.Unlock()
		return
	}
	r.written += len(b.Changes)
	if relisting {
		line := r.due(now)
		r.mu.Unlock()
		if line != nil {
			r.log.Info("relisting", line...)
		}
		return
	}
	r.active = false
	listed, written, took := r.listed, r.written, now.Sub(r.start)
	r.mu.Unlock()
	r.log.Info("synced", "objects", listed, "written", written, "took", took.Round(time.Millisecond).String(),
		"resourceVersion", b.Checkpoint.String())
	r.p.synced.check(r.p)
}

func (r *relistProgress) relisting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active
}

// syncedLog logs one line when every resource is synced into every sink, again after
// each later relist.
type syncedLog struct {
	logged atomic.Bool
}

// relisting notes that some relist began: the next time all are synced is worth a line.
func (s *syncedLog) relisting() {
	s.logged.Store(false)
}

// check logs the line when every cursor of every resource is synced and none relists.
func (s *syncedLog) check(p *Pipeline) {
	if s.logged.Load() {
		return
	}
	n := 0
	for _, st := range p.states {
		st.mu.Lock()
		cursors := st.cursors
		st.mu.Unlock()
		if len(cursors) < len(p.sinks) {
			return
		}
		for _, c := range cursors {
			if !c.ready.synced.Load() || c.diff.progress.relisting() {
				return
			}
		}
		n++
	}
	if s.logged.CompareAndSwap(false, true) {
		p.opts.Log.Info("all resources synced", "resources", n, "sinks", len(p.sinks))
	}
}
