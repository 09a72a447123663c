package check

import (
	"context"
	"fmt"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// Audit adds the audit receiver's row when it is configured: FAIL where run would
// fail (its certificate, client CA or token file), else whether audit events arrive and
// how the join of the last audit.statsWindow went; "warn" when none arrived.
func Audit(ctx context.Context, t *Table, cfg *config.Config) {
	w := cfg.Audit.Webhook
	if w.Listen == "" && cfg.Audit.LogFile.Path == "" {
		return
	}
	if w.Listen != "" {
		r := &audit.Receiver{CertFile: w.TLSCertFile, KeyFile: w.TLSKeyFile, ClientCAFile: w.ClientCAFile}
		if _, err := r.TLSConfig(); err != nil {
			t.Result("audit receiver", fmt.Errorf("audit.webhook (tlsCertFile, tlsKeyFile, clientCAFile): %w", err), "")
			return
		}
	}
	if w.TokenFile != "" {
		if _, err := audit.TokenFromFile(w.TokenFile); err != nil {
			t.Result("audit receiver", fmt.Errorf("audit.webhook.tokenFile: %w", err), "")
			return
		}
	}
	sc, err := cfg.AuditSink()
	if err != nil {
		t.Result("audit receiver", err, "")
		return
	}
	o := *sc.Postgres
	o.Migrate = false // checking only: never change the schema
	store, err := postgres.NewAuditStore(ctx, cfg.Cluster, o)
	if err != nil {
		t.Result("audit receiver", err, "")
		return
	}
	defer store.Close()
	window := cfg.Audit.StatsWindow
	st, err := store.JoinStats(ctx, time.Now().Add(-window))
	if err != nil {
		t.Row("audit receiver", "warn", fmt.Sprintf("cannot count the audit events in sink %s's database (not migrated yet?): %v", sc.Name, err))
		return
	}
	if st.Events == 0 {
		last := "never"
		if !st.LastReceived.IsZero() {
			last = "last " + st.LastReceived.UTC().Format(time.RFC3339)
		}
		from := "is the apiserver's audit webhook pointed at " + w.Listen
		if w.Listen == "" {
			from = "is the apiserver writing its audit log to " + cfg.Audit.LogFile.Path
		}
		t.Row("audit receiver", "warn", fmt.Sprintf("no audit events in the last %v (%s): %s?", window, last, from))
		return
	}
	t.Result("audit receiver", nil, fmt.Sprintf("%d audit events in the last %v; of %d changes %d joined exactly, %d nearest, %d unmatched; %d events matched no change",
		st.Events, window, st.Changes, st.Exact, st.Nearest, st.UnmatchedChanges, st.UnmatchedEvents))
}
