package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
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
	var stores auditStores = pgAuditStore{store}
	if ks, ok := firstKafkaSink(cfg); ok {
		aw, err := kafka.NewActorsWriter(cfg.Cluster, cfg.Audit.ActorsTopic, *ks.Kafka)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("sink %s: the actors topic: %w", ks.Name, err)
		}
		stores = withActorsTopic{pg: store, topic: aw}
		log.Info("writing audit events to the actors topic too", "sink", ks.Name, "topic", aw.Topic())
	}
	var runs []func(context.Context) error
	if w.Listen != "" {
		r := &audit.Receiver{Addr: w.Listen, CertFile: w.TLSCertFile, KeyFile: w.TLSKeyFile, ClientCAFile: w.ClientCAFile,
			Token: token, Store: stores, Log: log, Observer: m, MaxBodyBytes: w.MaxBodyBytes, MaxInFlight: w.MaxInFlight}
		ln, err := r.Listen(ctx)
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("audit.webhook (tlsCertFile, tlsKeyFile, clientCAFile, listen): %w", err)
		}
		runs = append(runs, func(ctx context.Context) error { return r.Serve(ctx, ln) })
	}
	if path := cfg.Audit.LogFile.Path; path != "" {
		f := &audit.LogFile{Path: path, Store: stores.forReader(cfg.LeaderElection.Identity), Poll: cfg.Audit.LogFile.PollInterval,
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

// auditStores is where the audit inputs store events: PostgreSQL, and the actors topic
// when a Kafka sink is configured.
type auditStores interface {
	audit.Store
	forReader(identity string) audit.PositionStore
}

type pgAuditStore struct{ *postgres.AuditStore }

func (s pgAuditStore) forReader(id string) audit.PositionStore { return s.ForReader(id) }

// withActorsTopic writes the events to the actors topic, then to PostgreSQL: a batch
// answered (or a log position stored) is in both; one that failed is sent again, and
// the topic may then hold an event twice (the same auditID).
type withActorsTopic struct {
	pg     *postgres.AuditStore
	topic  *kafka.ActorsWriter
	reader string
}

func (s withActorsTopic) Store(ctx context.Context, events []audit.Event) error {
	if err := s.topic.Write(ctx, actorRecords(events)); err != nil {
		return err
	}
	return s.pg.Store(ctx, events)
}

func (s withActorsTopic) forReader(id string) audit.PositionStore {
	s.reader = id
	return s
}

func (s withActorsTopic) Position(ctx context.Context, path string) (audit.Position, error) {
	return s.pg.ForReader(s.reader).Position(ctx, path)
}

func (s withActorsTopic) StoreAt(ctx context.Context, events []audit.Event, path string, pos audit.Position) error {
	if err := s.topic.Write(ctx, actorRecords(events)); err != nil {
		return err
	}
	return s.pg.ForReader(s.reader).StoreAt(ctx, events, path, pos)
}

func actorRecords(events []audit.Event) []kafka.Actor {
	out := make([]kafka.Actor, len(events))
	for i, e := range events {
		uid := e.ResponseUID
		if uid == "" {
			uid = e.ObjectUID
		}
		rv := ""
		if e.ResponseRV > 0 {
			rv = strconv.FormatUint(e.ResponseRV, 10)
		}
		out[i] = kafka.Actor{Group: e.Group, Resource: e.Resource, Subresource: e.Subresource, Namespace: e.Namespace,
			Name: e.Name, Verb: e.Verb, UID: uid, RV: rv, DeletedUIDs: e.DeletedUIDs, User: e.Username,
			Impersonator: e.Impersonator, UserAgent: e.UserAgent, AuditID: e.AuditID,
			Requested: e.RequestReceived, Completed: e.StageTimestamp}
	}
	return out
}

func firstKafkaSink(cfg *config.Config) (config.Sink, bool) {
	for _, s := range cfg.Sinks {
		if s.Type == config.SinkKafka {
			return s, true
		}
	}
	return config.Sink{}, false
}
