package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// auditInputs builds what cfg configures of the audit inputs (the webhook receiver,
// audit.webhook.listen; the log file, audit.logFile.path) and their store, and returns
// what runs them until ctx ends, the receiver bound already. Every replica runs them,
// leader or standby: the apiserver's webhook reaches whichever one the Service picks, and
// each stores what it receives.
func auditInputs(ctx context.Context, cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (run func(context.Context) error, _ *postgres.AuditStore, err error) {
	sc, err := cfg.AuditSink()
	if err != nil {
		return nil, nil, err
	}
	w := cfg.Audit.Webhook
	var token string
	if w.TokenFile != "" {
		if token, err = audit.TokenFromFile(w.TokenFile); err != nil {
			return nil, nil, fmt.Errorf("audit.webhook.tokenFile: %w", err)
		}
	}
	store, err := postgres.NewAuditStore(ctx, cfg.Cluster, *sc.Postgres)
	if err != nil {
		return nil, nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	log = log.With("component", "audit")
	var runs []func(context.Context) error
	if w.Listen != "" {
		r := &audit.Receiver{Addr: w.Listen, CertFile: w.TLSCertFile, KeyFile: w.TLSKeyFile, ClientCAFile: w.ClientCAFile,
			Token: token, Store: store, Log: log, Observer: m}
		ln, err := r.Listen(ctx)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("audit.webhook (tlsCertFile, tlsKeyFile, clientCAFile, listen): %w", err)
		}
		runs = append(runs, func(ctx context.Context) error { return r.Serve(ctx, ln) })
	}
	if path := cfg.Audit.LogFile.Path; path != "" {
		f := &audit.LogFile{Path: path, Store: store.ForReader(cfg.LeaderElection.Identity), Poll: cfg.Audit.LogFile.PollInterval,
			Log: log, Observer: m}
		runs = append(runs, f.Run)
	}
	run = func(ctx context.Context) error {
		if iv := cfg.Audit.StatsInterval; iv > 0 {
			go countJoin(ctx, store, iv, cfg.Audit.StatsWindow, log, m)
		}
		g, gctx := errgroup.WithContext(ctx)
		for _, r := range runs {
			g.Go(func() error { return r(gctx) })
		}
		return g.Wait()
	}
	return run, store, nil
}

// actorLookup gives the stdout and Kafka sinks the actors audit events name exactly,
// waiting up to wait (audit.wait) for those not stored yet.
type actorLookup struct {
	store *postgres.AuditStore
	wait  time.Duration
}

func (l *actorLookup) Actors(ctx context.Context, b change.Batch) ([]*envelope.Actor, error) {
	deadline := time.Now().Add(l.wait)
	for {
		found, err := l.store.ExactActors(ctx, b)
		if err != nil {
			return nil, err
		}
		out := make([]*envelope.Actor, len(found))
		missing := false
		for i, a := range found {
			if a == nil {
				// Snapshots and inferred deletes have no event to wait for.
				c := &b.Changes[i]
				missing = missing || !(c.Snapshot || c.Inferred)
				continue
			}
			out[i] = &envelope.Actor{Username: a.Username, Impersonator: a.Impersonator, UserAgent: a.UserAgent, AuditID: a.AuditID}
		}
		if !missing || !time.Now().Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(min(50*time.Millisecond, time.Until(deadline))):
		}
	}
}

// countJoin sets the join's metrics every interval, over the last window.
func countJoin(ctx context.Context, store *postgres.AuditStore, interval, window time.Duration, log *slog.Logger, m *metrics.Metrics) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := store.JoinStats(ctx, time.Now().Add(-window))
		if err != nil && ctx.Err() == nil {
			log.Warn("cannot count the actor join", "error", err)
		} else if err == nil {
			m.AuditJoin(map[string]int64{
				"events": st.Events, "changes": st.Changes, "exact": st.Exact, "nearest": st.Nearest,
				"unmatched_changes": st.UnmatchedChanges, "unmatched_events": st.UnmatchedEvents,
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
