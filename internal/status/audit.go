package status

import (
	"context"
	"fmt"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/config"
)

// Audit is how the actor join went (the audit receiver or log file is configured): the
// counts of the last audit.statsWindow, as the metric kube_cdc_audit_join has them.
type Audit struct {
	Sink   string `json:"sink"`   // the postgres sink whose database holds the events
	Window string `json:"window"` // how far back the counts reach ("5m0s")
	// LastReceived is when the newest event arrived, ever; null when none did.
	LastReceived     *time.Time `json:"lastReceived"`
	Events           int64      `json:"events"`
	Changes          int64      `json:"changes"` // observed, not snapshots or inferred deletes
	Exact            int64      `json:"exact"`
	Nearest          int64      `json:"nearest"`
	UnmatchedChanges int64      `json:"unmatchedChanges"`
	UnmatchedEvents  int64      `json:"unmatchedEvents"`
	Error            string     `json:"error,omitempty"` // why the counts could not be read
}

// readAudit reads the join's counts when cfg configures an audit input; nil otherwise.
func readAudit(ctx context.Context, cfg *config.Config, now time.Time, stores Stores) *Audit {
	if cfg.Audit.Webhook.Listen == "" && cfg.Audit.LogFile.Path == "" {
		return nil
	}
	a := &Audit{Window: cfg.Audit.StatsWindow.String()}
	sc, err := cfg.AuditSink()
	if err != nil {
		a.Error = err.Error()
		return a
	}
	a.Sink = sc.Name
	if stores.JoinCounts == nil {
		a.Error = "this reader does not count the actor join"
		return a
	}
	s, release, err := stores.Open(ctx, cfg, sc)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	defer release()
	counts, err := stores.JoinCounts(ctx, s, now.Add(-cfg.Audit.StatsWindow))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	counts.Sink, counts.Window = a.Sink, a.Window
	return &counts
}

// auditLines is the table form's lines about the join.
func auditLines(a *Audit, now time.Time) []string {
	if a == nil {
		return nil
	}
	if a.Error != "" {
		return []string{"audit: cannot count the actor join: " + a.Error}
	}
	last := "no audit event ever arrived"
	if a.LastReceived != nil {
		last = fmt.Sprintf("the last audit event arrived %s ago", now.Sub(*a.LastReceived).Round(time.Second))
	}
	return []string{fmt.Sprintf("audit (sink %s, last %s): %d events; of %d changes %d joined exactly, %d nearest, %d without an actor; %d events matched no change; %s",
		a.Sink, a.Window, a.Events, a.Changes, a.Exact, a.Nearest, a.UnmatchedChanges, a.UnmatchedEvents, last)}
}

// AuditOf is the join's counts as the audit store reads them, as status shows them.
func AuditOf(st audit.JoinStats) Audit {
	a := Audit{Events: st.Events, Changes: st.Changes, Exact: st.Exact, Nearest: st.Nearest,
		UnmatchedChanges: st.UnmatchedChanges, UnmatchedEvents: st.UnmatchedEvents}
	if !st.LastReceived.IsZero() {
		a.LastReceived = &st.LastReceived
	}
	return a
}
