package config

import (
	"io"
	"log/slog"

	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
)

// Logger is the logger log.level and log.format configure, writing to w.
func (l Log) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// PipelineOptions are the pipeline's options the config sets (cluster, pipeline.*,
// log.progressInterval); the caller adds what is not configuration (Log, Metrics, Abandon,
// Nudge, ClusterUID).
func (c *Config) PipelineOptions() pipeline.Options {
	return pipeline.Options{
		Cluster:     c.Cluster,
		BatchSize:   c.Pipeline.BatchSize,
		BatchBytes:  c.Pipeline.BatchBytes,
		MaxWait:     c.Pipeline.MaxWait,
		Buffer:      c.Pipeline.Buffer,
		DetachAfter: c.Pipeline.DetachAfter,
		// Progress lines of relists (pipeline/progress.go).
		ProgressInterval: c.Log.ProgressInterval,
	}
}

// IgnorePaths are the paths whose changes alone the history of resources[spec] leaves
// out, once resolved to group and resource (resources[].history, with the resource's
// defaults: ignorepaths.For).
func (c *Config) IgnorePaths(spec int, group, resource string) []string {
	h := c.Resources[spec].History
	return ignorepaths.For(group, resource, h.IgnorePaths, h.DefaultIgnorePaths)
}
