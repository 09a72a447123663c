package pipeline

import (
	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Kinds of drift (DriftObserver, the kube_cdc_drift_total metric): how a sink differed
// from the cluster when a relist compared them, beyond what changed since the sink's
// checkpoint. The reconcile diff repairs each of them.
const (
	// DriftMissing: the sink lacks an object the LIST shows at a version at or below the
	// checkpoint (a row or key deleted behind kube-cdc's back).
	DriftMissing = "missing"
	// DriftExtra: the sink holds an object the cluster no longer has (a delete the watch
	// did not deliver). Counted only in requested relists (resync, resnapshot), whose
	// watch streamed up to the relist: after a 410 or a restart, deletes missed while
	// nobody watched are expected. A delete made in the instant between the watch's end
	// and the LIST counts too.
	DriftExtra = "extra"
	// DriftStale: the sink holds an older version (or another uid) of an object whose
	// listed version is at or below the checkpoint: a change the sink should have had.
	DriftStale = "stale"
	// DriftEdited: the sink holds the listed version, but its copy is not what kube-cdc
	// wrote (change.Entry.Drifted: a PostgreSQL row edited by hand).
	DriftEdited = "edited"
)

var driftKinds = [...]string{kindMissing: DriftMissing, kindExtra: DriftExtra, kindStale: DriftStale, kindEdited: DriftEdited}

// Indexes of driftKinds.
const (
	kindMissing = iota
	kindExtra
	kindStale
	kindEdited
)

// DriftObserver is an optional Metrics ability: it counts the drift relists found.
type DriftObserver interface {
	Drift(sink, resource, kind string, n int)
}

// driftKeysLogged caps the keys named per kind in a drift log line.
const driftKeysLogged = 20

// relistStats is what one relist of one cursor listed, wrote and found.
type relistStats struct {
	listed, written, deleted int
	drift                    [len(driftKinds)]int
	keys                     [len(driftKinds)][]string // the first driftKeysLogged of each kind
}

func (s *relistStats) found(kind int, k change.Key) {
	s.drift[kind]++
	if len(s.keys[kind]) < driftKeysLogged {
		s.keys[kind] = append(s.keys[kind], k.String())
	}
}

// reportDrift logs (at warn, with up to driftKeysLogged keys per kind) and counts the
// drift the relist just ended found; the batches it wrote repair it.
func (d *reconcileDiff) reportDrift() {
	s := &d.stats
	var args []any
	for i, kind := range driftKinds {
		n := s.drift[i]
		if n == 0 {
			continue
		}
		args = append(args, kind, n, kind+"_keys", s.keys[i])
		if m, ok := d.p.opts.Metrics.(DriftObserver); ok {
			m.Drift(d.sink.Name(), d.res.ID(), kind, n)
		}
	}
	if len(args) == 0 {
		return
	}
	d.log.Warn("drift: the sink differed from the cluster beyond what changed since its checkpoint; repairing it", args...)
}
