package deliver

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/audit"
)

// StatsStore counts the join of the window since since (the audit store).
type StatsStore interface {
	JoinStats(ctx context.Context, since time.Time) (audit.JoinStats, error)
}

// JoinObserver takes the counts (internal/metrics: kube_cdc_audit_join).
type JoinObserver interface {
	AuditJoin(counts map[string]int64)
}

// JoinCounter counts the join every Interval over the last Window.
type JoinCounter struct {
	Store    StatsStore
	Interval time.Duration // audit.statsInterval; must be > 0
	Window   time.Duration // audit.statsWindow
	Observer JoinObserver
	Log      *slog.Logger
	Clock    clock.WithTicker // nil: the real clock
}

// Run counts at once, then every Interval, until ctx ends.
func (j *JoinCounter) Run(ctx context.Context) {
	clk := j.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTicker(j.Interval)
	defer t.Stop()
	for {
		st, err := j.Store.JoinStats(ctx, clk.Now().Add(-j.Window))
		switch {
		case err != nil && ctx.Err() == nil:
			j.Log.Warn("cannot count the actor join", "error", err)
		case err == nil:
			j.Observer.AuditJoin(map[string]int64{
				"events": st.Events, "changes": st.Changes, "exact": st.Exact, "nearest": st.Nearest,
				"unmatched_changes": st.UnmatchedChanges, "unmatched_events": st.UnmatchedEvents,
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
