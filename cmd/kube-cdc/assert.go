package main

import (
	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/writerlock"
	"github.com/kube-cdc/kube-cdc/internal/sinks/stdout"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// The wiring's compile-time checks: each sink is a pipeline.Sink and a source feed a
// pipeline.Target. They live here, where the pieces meet, so that no sink imports the
// pipeline and the pipeline imports no source.
var (
	_ pipeline.Sink           = (*postgres.Sink)(nil)
	_ pipeline.ScopeKeeper    = (*postgres.Sink)(nil)
	_ pipeline.EpochKeeper    = (*postgres.Sink)(nil)
	_ pipeline.NewestKeeper   = (*postgres.Sink)(nil)
	_ pipeline.IdentityKeeper = (*postgres.Sink)(nil)
	_ pipeline.Sink           = (*kafka.Sink)(nil)
	_ pipeline.ScopeKeeper    = (*kafka.Sink)(nil)
	_ pipeline.EpochKeeper    = (*kafka.Sink)(nil)
	_ pipeline.Sink           = (*stdout.Sink)(nil)
	_ pipeline.ScopeKeeper    = (*stdout.Sink)(nil)
	_ pipeline.EpochKeeper    = (*stdout.Sink)(nil)
	_ pipeline.Target         = (*source.Feed)(nil)
	_ measuredSink            = (*postgres.Sink)(nil)
	_ writerlock.Claimer      = (*postgres.Sink)(nil)
	_ measuredSink            = (*kafka.Sink)(nil)
	_ source.RelistObserver   = (*metrics.Metrics)(nil)
)
