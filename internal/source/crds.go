package source

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// CRDWatch tells when a CustomResourceDefinition of a configured resource is created,
// changed or deleted, so that a resource waiting for its CRD is tried again at once
// rather than at the end of its backoff (pipeline.Options.Nudge). It is a hint, never
// needed for correctness: without permission to list and watch CRDs (kube-cdc's RBAC is
// list and watch on the configured resources) it says so once and stops, and the retries
// find the CRD all the same, within their backoff's cap.
type CRDWatch struct {
	Clients *Clients
	// Resources are the resources to tell about, by group and plural; a CRD of any other
	// resource changes nothing.
	Resources []change.Resource
	Backoff   retry.Backoff // spaces failed watches; waited on Clock
	Log       *slog.Logger
	Clock     clock.Clock // default the real clock

	mu      sync.Mutex
	changed chan struct{}
}

// ForCRDs returns the resources among targets that a CRD could serve (their group has a
// dot): what a CRDWatch should tell about. None: no watch is needed.
func ForCRDs(targets []Target) []change.Resource {
	var out []change.Resource
	for _, t := range targets {
		if strings.Contains(t.Resource.Group, ".") {
			out = append(out, t.Resource)
		}
	}
	return out
}

// Changed returns a channel that is closed at the next change of a CRD of Resources.
func (w *CRDWatch) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

func (w *CRDWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// matters reports whether the CRD in data serves one of Resources.
func (w *CRDWatch) matters(data []byte) bool {
	m := gjson.GetManyBytes(data, "spec.group", "spec.names.plural")
	for _, r := range w.Resources {
		if r.Group == m[0].Str && r.Resource == m[1].Str {
			return true
		}
	}
	return false
}

// Run watches CRDs until ctx ends, then returns nil. It never fails: what it cannot
// watch, it logs and leaves to the retries.
func (w *CRDWatch) Run(ctx context.Context) error {
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	if w.Clock == nil {
		w.Clock = clock.RealClock{}
	}
	if len(w.Resources) == 0 {
		<-ctx.Done()
		return nil
	}
	rv, failures := "", 0
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			if rv, err = w.listRV(ctx); err == nil {
				// A CRD created between the resolution and this LIST changed nothing yet.
				w.fire()
			}
		}
		if err == nil {
			rv, err = w.watch(ctx, rv)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || notServed(err):
			w.Log.Info("cannot watch CustomResourceDefinitions; a CRD created for a resource that waits for it is found by the resource's retries instead (within a minute)",
				"error", err)
			<-ctx.Done()
			return nil
		case err != nil:
			d := w.Backoff.Delay(failures)
			failures++
			w.Log.Debug("watch of CustomResourceDefinitions failed; retrying", "in", d.Round(time.Millisecond).String(), "error", err)
			t := w.Clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		default:
			failures = 0
		}
	}
	return nil
}

// listRV is the RV of a LIST of CRDs: where a watch starts.
func (w *CRDWatch) listRV(ctx context.Context) (string, error) {
	res := w.Clients.list.Get().AbsPath(crdsPath).Param("limit", "1").Do(ctx)
	body, err := res.Raw()
	if err != nil {
		return "", res.Error()
	}
	return gjson.GetBytes(body, "metadata.resourceVersion").Str, nil
}

// watch follows CRDs from rv until the watch ends and returns the RV to go on from: ""
// when the history is gone (list again).
func (w *CRDWatch) watch(ctx context.Context, rv string) (string, error) {
	wi, err := w.Clients.watch.Get().AbsPath(crdsPath).
		Param("watch", "true").
		Param("resourceVersion", rv).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.Itoa(300+rand.IntN(300))).
		Watch(ctx)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return "", nil
		}
		return rv, err
	}
	defer wi.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok = <-wi.ResultChan():
		}
		if !ok {
			return rv, nil
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return "", nil
			}
			return rv, err
		}
		o, isRaw := ev.Object.(*rawObject)
		if !isRaw {
			continue
		}
		rv = o.rv
		if ev.Type != watch.Bookmark && w.matters(o.data) {
			w.Log.Debug("a CustomResourceDefinition of a configured resource changed", "event", string(ev.Type),
				"group", gjson.GetBytes(o.data, "spec.group").Str, "plural", gjson.GetBytes(o.data, "spec.names.plural").Str)
			w.fire()
		}
	}
}
