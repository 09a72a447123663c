package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

// openStore opens the checkpoint store of a stdout sink (with type none, the default, it
// relists and emits a snapshot at every start).
func openStore(sc config.Sink) (checkpoint.Store, error) {
	st, err := checkpoint.Open(sc.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("sink %s: checkpoint: %w", sc.Name, err)
	}
	return st, nil
}

func openKafka(ctx context.Context, cfg *config.Config, sc config.Sink, log *slog.Logger) (pipeline.Sink, error) {
	store, err := kafka.OpenCheckpoint(ctx, cfg.Cluster, *sc.Kafka, sc.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("sink %s: checkpoint: %w", sc.Name, err)
	}
	s, err := kafka.New(ctx, sc.Name, cfg.Cluster, *sc.Kafka, store, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	return s, nil
}
