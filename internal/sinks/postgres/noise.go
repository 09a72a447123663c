package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Noise control (docs/reading.md, "Noise control for history"; internal/ignorepaths): a watch
// update whose differences from the previous version of the same uid all lie under the
// resource's ignore paths updates objects but adds no changes row. skipNoiseSQL
// (statements.go) decides in the write's transaction, against the objects row the upsert
// is about to replace, so nothing but the key index is kept in memory and the decision
// holds across restarts.

// SetIgnorePaths sets the ignore paths of res's scope (ignorepaths.For: defaults
// included; each accepted by ignorepaths.Validate); none: every version is a changes
// row. Call it before the first Write.
func (s *Sink) SetIgnorePaths(res change.Resource, paths []string) {
	if s.ignore == nil {
		s.ignore = map[string]*noiseSQL{}
	}
	key := ignoreKey(res)
	if len(paths) > 0 {
		s.ignore[key] = newNoiseSQL(pgx.Identifier{s.opts.Schema}.Sanitize(), key, paths)
	} else {
		delete(s.ignore, key)
	}
}

// ignoreKey names a resource's scope whatever version of it is served.
func ignoreKey(res change.Resource) string { return res.Group + "/" + res.Resource + "#" + res.Scope }

// historyMetrics is the metrics hook's optional count of the changes left out of history
// as noise (kube_cdc_history_skipped_total); *metrics.Metrics implements it.
type historyMetrics interface {
	HistorySkipped(sink, resource string, n int)
}
