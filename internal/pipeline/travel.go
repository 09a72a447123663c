package pipeline

import (
	"context"
	"sync"
	"time"

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
// by an observed delete) can only be the cluster gone back; the same uid at the held RV or
// above, a cluster not behind it. A version whose object is gone or recreated tells
// neither, and the next newest is read (up to newestLooked). It returns the time travel,
// or nil when there is none or it cannot tell (no NewestKeeper, an error).
func (p *Pipeline) heldAhead(ctx context.Context, s Sink, t Target, res change.Resource) *change.TimeTravel {
	k, ok := s.(NewestKeeper)
	if !ok {
		return nil
	}
	log := p.opts.Log.With("sink", s.Name(), "resource", res.ID())
	newest, err := k.Newest(ctx, res, newestLooked)
	if err != nil {
		log.Debug("could not read the newest versions the sink holds; not checked for time travel", "error", err)
		return nil
	}
	for _, h := range newest {
		if !t.Owns(h.Key) {
			continue
		}
		cur, found, err := t.Current(ctx, h.Key)
		if err != nil {
			log.Debug("could not read the object the sink holds newest; not checked for time travel", "object", h.Key.String(), "error", err)
			return nil
		}
		switch {
		case !found || cur.UID != h.UID || h.Deleted && h.Inferred:
			// Inconclusive: deleted or recreated since (no travel), or gone back to before
			// it existed (travel). The next newest may tell.
			continue
		case cur.RV >= h.RV:
			return nil // the cluster has this version or a later one: not behind the sink
		}
		return &change.TimeTravel{Reason: change.TravelObjectWentBack, Key: h.Key, HeldRV: h.RV, ListRV: cur.RV}
	}
	return nil
}

// findTravelsTimeout bounds findTravels' look at one sink.
const findTravelsTimeout = 10 * time.Second

// findTravels looks, once at start and before any resource streams, for a time travel in
// each sink: a target whose server RV is below the sink's checkpoint, or whose newest
// version the sink holds is back at a lower RV (heldAhead). A restore sends the whole
// cluster back, but only some resources show it: one whose checkpoint bookmarks moved
// past the backup and that did not change since would resume its watch from that
// checkpoint and miss the restored cluster's changes below it. So a time travel found in
// one resource of a sink starts a new epoch for every resource of that sink that has a
// checkpoint. What it finds is kept for each target's first round (startTravels); a
// target it could not check (an error, a resource not served yet) is checked by that
// round itself.
func (p *Pipeline) findTravels(ctx context.Context) {
	p.startTravels.m = map[travelKey]*change.TimeTravel{}
	for _, s := range p.sinks {
		// Bounded: a sink or apiserver that does not answer must not hold back the start;
		// what is left unchecked, each target's first round checks itself.
		ctx, cancel := context.WithTimeout(ctx, findTravelsTimeout)
		var found *change.TimeTravel
		var finder *resourceState
		var checked []*resourceState
		if tt := p.otherCluster(ctx, s); tt != nil {
			found = tt
		}
		for _, st := range p.states {
			t, res := st.t, st.res
			if res.Version == "" || ctx.Err() != nil {
				continue // not served (yet): its first round resolves and checks it
			}
			ck, err := s.Checkpoint(ctx, res)
			if err != nil || ck == 0 {
				continue
			}
			tt := p.heldAhead(ctx, s, t, res)
			if tt == nil {
				if rv, err := t.ServerRV(ctx); err == nil && rv > 0 && rv < ck {
					tt = &change.TimeTravel{Reason: change.TravelListBelowCheckpoint, ListRV: rv}
				}
			}
			checked = append(checked, st)
			if tt != nil && found == nil {
				found, finder = tt, st
				found.FoundIn = res.ID()
			}
		}
		for _, st := range checked {
			var tt *change.TimeTravel
			switch {
			case found == nil:
			case st == finder:
				c := *found
				c.FoundIn = "" // its own
				tt = &c
			case finder == nil: // the cluster's identity, not one resource, showed it
				c := *found
				tt = &c
			default:
				tt = &change.TimeTravel{Reason: change.TravelAnotherResource, FoundIn: found.FoundIn}
			}
			p.startTravels.m[travelKey{st, s.Name()}] = tt
		}
		cancel()
		if found != nil {
			p.opts.Log.Warn("time travel at start: the cluster is behind what the sink holds; every resource of the sink relists in a new epoch",
				"sink", s.Name(), "found_in", found.FoundIn, "reason", found.Reason)
		}
	}
}

// otherCluster reports a sink whose checkpoints were taken in another cluster than the
// one kube-cdc reads now (Options.ClusterUID, the kube-system namespace's uid): a cluster
// rebuilt under the same `cluster` name. nil when they match, or either is unknown.
func (p *Pipeline) otherCluster(ctx context.Context, s Sink) *change.TimeTravel {
	k, ok := s.(IdentityKeeper)
	if !ok || p.opts.ClusterUID == "" {
		return nil
	}
	uids, err := k.ClusterUIDs(ctx)
	if err != nil {
		p.opts.Log.Debug("could not read the cluster identity of the sink's checkpoints", "sink", s.Name(), "error", err)
		return nil
	}
	for _, u := range uids {
		if u != p.opts.ClusterUID {
			return &change.TimeTravel{Reason: change.TravelClusterIdentity, FoundIn: "cluster identity " + u + " → " + p.opts.ClusterUID}
		}
	}
	return nil
}

type travelKey struct {
	st   *resourceState
	sink string
}

// startTravels is what findTravels found per (target, sink): a time travel, or nil for
// none; absent when it did not check.
type startTravels struct {
	mu sync.Mutex
	m  map[travelKey]*change.TimeTravel
}

// take returns, once, what findTravels found for (st, sink) and whether it checked.
func (s *startTravels) take(st *resourceState, sink string) (*change.TimeTravel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := travelKey{st, sink}
	tt, ok := s.m[k]
	delete(s.m, k)
	return tt, ok
}
