package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/envelope"
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/stdout"
)

// openSinks opens every configured sink with its checkpoint store. On error, the sinks
// opened so far are closed. m (nil: no metrics) receives what a sink measures itself,
// such as the PostgreSQL and Kafka sinks' quarantined changes.
//
// actors (nil: none) gives the sinks that write who made a change as they write it
// (stdout, Kafka) the actors known by then (audit.go).
func openSinks(ctx context.Context, cfg *config.Config, log *slog.Logger, m *metrics.Metrics, actors envelope.Actors) ([]pipeline.Sink, func(), error) {
	var sinks []pipeline.Sink
	closeAll := func() {
		for _, s := range sinks {
			if err := s.Close(); err != nil {
				log.Warn("close sink", "sink", s.Name(), "error", err)
			}
		}
	}
	for _, sc := range cfg.Sinks {
		s, err := openSinkWith(ctx, cfg, sc, log, actors)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if ms, ok := s.(measuredSink); ok && m != nil {
			ms.SetMetrics(m)
		}
		// status reads a file store through its copy while this process holds the file.
		if ks, ok := s.(storeKeeper); ok {
			if f, ok := ks.CheckpointStore().(*checkpoint.File); ok {
				m.ServeCheckpointFile(sc.Name, f)
			}
		}
		sinks = append(sinks, s)
	}
	return sinks, closeAll, nil
}

// measuredSink is a sink that counts what only it sees (its quarantined changes) into
// the metrics: the PostgreSQL and Kafka sinks. postgres.Metrics and kafka.Metrics are
// aliases of one unnamed interface, so either names the parameter.
type measuredSink interface {
	SetMetrics(postgres.Metrics)
}

func openSink(ctx context.Context, cfg *config.Config, sc config.Sink, log *slog.Logger) (pipeline.Sink, error) {
	return openSinkWith(ctx, cfg, sc, log, nil)
}

// storeKeeper is a sink that keeps its checkpoints in a checkpoint.Store (checkpoint.Keeper:
// the Kafka and stdout sinks).
type storeKeeper interface{ CheckpointStore() checkpoint.Store }

// actorsSetter is the Kafka sink's way of taking the actors after it is open.
type actorsSetter interface{ SetActors(envelope.Actors) }

func openSinkWith(ctx context.Context, cfg *config.Config, sc config.Sink, log *slog.Logger, actors envelope.Actors) (pipeline.Sink, error) {
	switch sc.Type {
	case config.SinkPostgres:
		return postgres.New(ctx, sc.Name, cfg.Cluster, *sc.Postgres, log)
	case config.SinkStdout:
		store, err := openStore(sc)
		if err != nil {
			return nil, err
		}
		opts := stdout.Options{Cluster: cfg.Cluster, Actors: actors}
		if sc.Stdout != nil {
			opts.ResolvedInterval = sc.Stdout.ResolvedInterval
		}
		return stdout.New(sc.Name, os.Stdout, store, opts), nil
	case config.SinkKafka:
		s, err := openKafka(ctx, cfg, sc, log)
		if err == nil && actors != nil {
			s.(actorsSetter).SetActors(actors)
		}
		return s, err
	}
	return nil, fmt.Errorf("sinks: %s: unknown type %q", sc.Name, sc.Type)
}
