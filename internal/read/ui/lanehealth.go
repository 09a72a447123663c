package ui

import (
	"context"
	"slices"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/health"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// Health on the lanes and the chart is computed here, when read, from each version's
// object (internal/health): a version is bad when its object is failed or degraded. A
// transition is a version whose badness differs from the version before it of the same
// object; an object's first version counts as a transition only when it is bad.

// bodyResources are the resources whose objects the reads bring, for their health.
func bodyResources() []change.Resource {
	rs := health.Resources()
	out := make([]change.Resource, len(rs))
	for i, r := range rs {
		out[i] = change.Resource{Group: r[0], Resource: r[1]}
	}
	return out
}

// verdict is a version's health as the lanes and the chart show it.
type verdict struct {
	known  bool // the resource has a rule and the version an object
	bad    bool
	reason string
}

func healthOfVersion(group, resource string, op change.Op, object []byte) verdict {
	if op == change.OpDelete || len(object) == 0 || !health.Known(group, resource) {
		return verdict{}
	}
	h, err := health.Of(group, resource, object)
	if err != nil {
		return verdict{}
	}
	return verdict{known: true, bad: h.State == health.Failed || h.State == health.Degraded, reason: h.String()}
}

// transition is what a version did to its object's health.
type transition int

const (
	steady    transition = iota
	wentBad              // bad, after a version that was not (or as its first)
	recovered            // not bad, after a version that was
)

// tracker follows one object's health version by version.
type tracker struct {
	seen, bad bool
}

// step reads the next version's verdict.
func (t *tracker) step(v verdict) transition {
	if !v.known {
		return steady
	}
	was, seen := t.bad, t.seen
	t.seen, t.bad = true, v.bad
	switch {
	case v.bad && (!seen || !was):
		return wentBad
	case !v.bad && seen && was:
		return recovered
	}
	return steady
}

// healthSeriesLimit caps the versions the chart reads for its health series.
const healthSeriesLimit = 20000

// healthCounts counts, per bucket of step from origin, the versions the filter selects
// that made an object go bad and recover. It reads the versions of the resources with a
// health rule that the chart's counts show in the range, none when there are none (a
// range of ConfigMaps costs nothing more). more: there were more of them than
// healthSeriesLimit, and the counts stop there.
func (s *Server) healthCounts(ctx context.Context, f store.Filter, counts []store.Count, origin time.Time, step time.Duration, buckets int) (bad, rec []int64, more bool, err error) {
	bad, rec = make([]int64, buckets), make([]int64, buckets)
	var present []change.Resource
	for _, r := range bodyResources() {
		if slices.ContainsFunc(counts, func(c store.Count) bool { return c.Group == r.Group && c.Resource == r.Resource }) {
			present = append(present, r)
		}
	}
	if len(present) == 0 {
		return bad, rec, false, nil
	}
	f.Op, f.Flag, f.Before = "", "", 0 // an object's health follows all its versions
	vs, more, err := s.o.Store.HealthVersions(ctx, f, present, healthSeriesLimit)
	if err != nil {
		return nil, nil, false, err
	}
	objects := map[[4]string]*tracker{}
	for _, v := range vs {
		k := [4]string{v.Group, v.Resource, v.Namespace, v.Name}
		t := objects[k]
		if t == nil || v.Op == change.OpCreate {
			t = &tracker{}
			objects[k] = t
		}
		b := int(v.ObservedAt.Sub(origin) / step)
		if b < 0 || b >= buckets {
			continue
		}
		switch t.step(healthOfVersion(v.Group, v.Resource, v.Op, v.Object)) {
		case wentBad:
			bad[b]++
		case recovered:
			rec[b]++
		}
	}
	return bad, rec, more, nil
}
