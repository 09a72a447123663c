package main

import (
	"context"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/audit/deliver"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
)

// auditInputs builds what cfg configures of the audit inputs (the webhook receiver,
// audit.webhook.listen; the log file, audit.logFile.path) and their store, and returns
// what runs them until ctx ends, the receiver bound already. Every replica runs them,
// leader or standby: the apiserver's webhook reaches whichever one the Service picks, and
// each stores what it receives.
func auditInputs(ctx context.Context, cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (run func(context.Context) error, _ *auditstore.Store, err error) {
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
	var events audit.Store = store
	var positions audit.PositionStore = store.ForReader(cfg.LeaderElection.Identity)
	if ks, ok := cfg.KafkaSink(); ok {
		aw, err := kafka.NewActorsWriter(cfg.Cluster, cfg.Audit.ActorsTopic, *ks.Kafka)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("sink %s: the actors topic: %w", ks.Name, err)
		}
		both := deliver.TopicFirst{Topic: aw, Events: store, Positions: positions}
		events, positions = both, both
		log.Info("writing audit events to the actors topic too", "sink", ks.Name, "topic", aw.Topic())
	}
	var runs []func(context.Context) error
	if w.Listen != "" {
		r := &audit.Receiver{Addr: w.Listen, CertFile: w.TLSCertFile, KeyFile: w.TLSKeyFile, ClientCAFile: w.ClientCAFile,
			Token: token, Store: events, Log: log, Observer: m, MaxBodyBytes: w.MaxBodyBytes, MaxInFlight: w.MaxInFlight}
		ln, err := r.Listen(ctx)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("audit.webhook (tlsCertFile, tlsKeyFile, clientCAFile, listen): %w", err)
		}
		runs = append(runs, func(ctx context.Context) error { return r.Serve(ctx, ln) })
	}
	if path := cfg.Audit.LogFile.Path; path != "" {
		f := &audit.LogFile{Path: path, Store: positions, Poll: cfg.Audit.LogFile.PollInterval, Log: log, Observer: m}
		runs = append(runs, f.Run)
	}
	if iv := cfg.Audit.StatsInterval; iv > 0 {
		j := &deliver.JoinCounter{Store: store, Interval: iv, Window: cfg.Audit.StatsWindow, Observer: m, Log: log}
		runs = append(runs, func(ctx context.Context) error { j.Run(ctx); return nil })
	}
	run = func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, r := range runs {
			g.Go(func() error { return r(gctx) })
		}
		return g.Wait()
	}
	return run, store, nil
}
