package pipeline

import (
	"context"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// newestLooked is how many of a sink's newest versions heldAhead reads to find one its
// target owns.
const newestLooked = 20

// heldAhead looks, before a target streams into sink s from a checkpoint, for the cluster
// gone back behind what s holds: an etcd restored to a backup older than s's newest
// version, whose RVs have meanwhile grown past the checkpoint, so that no probe finds the
// server behind it and the watch from the checkpoint would miss the restored cluster's
// changes below it. It reads s's newest version of the resource (one the target owns) and
// the object under its key now: the same uid at a lower RV than s holds (live, or deleted
// by an observed delete) can only be the cluster gone back. It returns the time travel,
// or nil when there is none or it cannot tell (no NewestKeeper, no Current, an error).
func (p *Pipeline) heldAhead(ctx context.Context, s Sink, t Target) *change.TimeTravel {
	k, ok := s.(NewestKeeper)
	if !ok || t.Current == nil {
		return nil
	}
	log := p.opts.Log.With("sink", s.Name(), "resource", t.Resource.ID())
	newest, err := k.Newest(ctx, t.Resource, newestLooked)
	if err != nil {
		log.Debug("could not read the newest versions the sink holds; not checked for time travel", "error", err)
		return nil
	}
	for _, h := range newest {
		if t.Owns != nil && !t.Owns(h.Key) {
			continue
		}
		cur, found, err := t.Current(ctx, h.Key)
		if err != nil {
			log.Debug("could not read the object the sink holds newest; not checked for time travel", "object", h.Key.String(), "error", err)
			return nil
		}
		if !found || cur.UID != h.UID || cur.RV >= h.RV || h.Deleted && h.Inferred {
			return nil
		}
		return &change.TimeTravel{Reason: change.TravelObjectWentBack, Key: h.Key, HeldRV: h.RV, ListRV: cur.RV}
	}
	return nil
}
