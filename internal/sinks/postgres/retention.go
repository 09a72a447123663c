package postgres

import (
	"context"
	"time"
)

// retentionEvery is how often, at most, Write triggers the deletion of old changes rows.
const retentionEvery = time.Minute

// maybeRetain starts the deletion of changes older than opts.Retention in the background,
// at most once per retentionEvery and never twice at a time, so Write does not wait for it.
func (s *Sink) maybeRetain() {
	if s.opts.Retention <= 0 {
		return
	}
	now := time.Now()
	if now.UnixNano()-s.lastRetention.Load() < int64(retentionEvery) || !s.retentionBusy.CompareAndSwap(false, true) {
		return
	}
	s.lastRetention.Store(now.UnixNano())
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.retentionBusy.Store(false)
		n, err := s.DeleteExpiredChanges(s.bgCtx, now.Add(-s.opts.Retention))
		if err != nil && s.bgCtx.Err() == nil {
			s.log.Warn("retention: delete old changes", "sink", s.name, "error", err)
			return
		}
		if n > 0 {
			s.log.Debug("retention: deleted old changes", "sink", s.name, "rows", n)
		}
	}()
}

// DeleteExpiredChanges deletes the sink's cluster's changes rows observed before cutoff, in chunks so no
// statement holds locks for long, and returns how many it deleted.
func (s *Sink) DeleteExpiredChanges(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.sql.retention, s.cluster, cutoff, retentionChunk)
		if err != nil {
			return total, classify(err, s.password)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < retentionChunk {
			return total, nil
		}
	}
}

const retentionChunk = 10000
