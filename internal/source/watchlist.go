package source

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// ListMode says how a relist reads a collection.
type ListMode string

const (
	// ListAuto streams where the server supports it and lists pages where it does not,
	// found out once per resource (ListModes remembers it).
	ListAuto ListMode = "auto"
	// ListStream streams the collection (WatchList): a watch with sendInitialEvents=true
	// whose initial ADDED events are the snapshot, ended by a bookmark annotated
	// k8s.io/initial-events-end. A server without the feature is a terminal error.
	ListStream ListMode = "stream"
	// ListPaged LISTs the collection in pages (limit and continue).
	ListPaged ListMode = "paged"
)

// ListModes remembers, per resource, whether the server streams lists, so that ListAuto
// asks once per resource rather than once per relist. One value serves every stream of
// a process; the zero value is ready to use.
type ListModes struct {
	mu      sync.Mutex
	decided map[string]ListMode // by resource ID: ListStream or ListPaged
}

func (m *ListModes) get(resource string) ListMode {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decided[resource]
}

func (m *ListModes) set(resource string, mode ListMode) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.decided == nil {
		m.decided = map[string]ListMode{}
	}
	m.decided[resource] = mode
}

// Mode is what was found for resource: ListStream, ListPaged, or "" when no relist of it
// has asked yet.
func (m *ListModes) Mode(resource string) ListMode { return m.get(resource) }

// errNoWatchList says the server does not stream lists of this resource: it refused
// sendInitialEvents (422, "forbidden … unless the WatchList feature gate is enabled"),
// or ignored it (a plain watch: a bookmark without the initial-events-end annotation, or
// a MODIFIED or DELETED event before any).
type errNoWatchList struct{ err error }

func (e *errNoWatchList) Error() string {
	return "the server does not stream lists (WatchList): " + e.err.Error()
}
func (e *errNoWatchList) Unwrap() error { return e.err }

// listMode is the mode this relist uses: Stream.ListMode, with ListAuto narrowed by what
// an earlier relist of the resource found.
func (s *Stream) listMode() ListMode {
	switch s.ListMode {
	case ListStream:
		return ListStream
	case ListAuto:
		if m := s.ListModes.get(s.Target.Resource.ID()); m != "" {
			return m
		}
		return ListAuto
	default:
		return ListPaged
	}
}

// streamList is a relist read as a streaming list. It first asks the server for its
// current resource version with a LIST of one object (which also says, through
// remainingItemCount, about how many objects there are), then watches with
// sendInitialEvents=true, resourceVersionMatch=NotOlderThan from that RV: the initial
// ADDED events are the collection at some RV at least that one, and become Listed events
// exactly as a paged LIST's items do, with ListRV the probe's RV (a lower bound of the
// snapshot's, so the cursors' time-travel check sees a server behind their checkpoint
// before any object is written). RelistEnd, and with it every checkpoint, comes only at
// the bookmark annotated k8s.io/initial-events-end, with the bookmark's RV, the
// snapshot's. The watch is then closed and the stream watches on from that RV as after a
// paged LIST: one more watch request, but one watch code path.
//
// It returns an *errNoWatchList, before emitting anything, when the server does not
// stream lists of this resource.
func (s *Stream) streamList(ctx context.Context, emit func(context.Context, change.Event) error) (change.RV, error) {
	res := s.Target.Resource
	probeRV, estimate, err := s.probe(ctx)
	if err != nil {
		return 0, err
	}
	req := s.Clients.watch.Get().AbsPath(collectionPath(res, s.namespace())).
		Param("watch", "true").
		Param("sendInitialEvents", "true").
		Param("resourceVersionMatch", string(metav1.ResourceVersionMatchNotOlderThan)).
		Param("resourceVersion", probeRV.String()).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.FormatInt(s.watchTimeoutSeconds(), 10))
	if s.Target.LabelSelector != "" {
		req = req.Param("labelSelector", s.Target.LabelSelector)
	}
	if s.Target.FieldSelector != "" {
		req = req.Param("fieldSelector", s.Target.FieldSelector)
	}
	ws, err := openWatch(ctx, req)
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return 0, &errNoWatchList{err}
		}
		return 0, classify(res, "streaming list", err)
	}
	defer ws.Close()
	s.accept()
	s.observeStart(ListStream)
	if err := emit(ctx, change.Event{Type: change.RelistBegin}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	p := s.newListProgress()
	for {
		ev, err := ws.next()
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			// The server ended the watch (its timeout, a restart, a watcher too slow for
			// it) or the stream broke before the snapshot was whole: the relist starts over.
			return 0, fmt.Errorf("resource %s: streaming list: the watch ended after %d objects, before the initial-events-end bookmark: %w", res.ID(), p.listed, err)
		}
		switch ev.typ {
		case eventError:
			err := statusError(ev.object)
			if p.listed == 0 && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
				return 0, &errNoWatchList{err}
			}
			return 0, classify(res, "streaming list", err)
		case eventBookmark:
			m := gjson.GetManyBytes(ev.object, `metadata.annotations.k8s\.io/initial-events-end`, "metadata.resourceVersion")
			if m[0].Str != "true" {
				// With sendInitialEvents the server bookmarks nothing before the end of
				// the initial events; a plain bookmark is a server that ignored it.
				return 0, &errNoWatchList{fmt.Errorf("a bookmark without the %s annotation before the initial events ended", metav1.InitialEventsAnnotationKey)}
			}
			listRV, err := change.ParseRV(m[1].Str)
			if err != nil {
				return 0, retry.Terminal(fmt.Errorf("resource %s: initial-events-end bookmark: %w", res.ID(), err))
			}
			if s.ListMode == ListAuto {
				s.ListModes.set(res.ID(), ListStream)
			}
			if err := emit(ctx, change.Event{Type: change.RelistEnd, RV: listRV}); err != nil {
				return 0, errors.Join(errEmit, err)
			}
			p.done()
			return listRV, nil
		case eventAdded:
			c, err := s.toChange(ev.object, s.Clock.Now())
			if err != nil {
				return 0, err
			}
			if !s.wanted(c.Key.Namespace) {
				continue
			}
			c.Snapshot = true
			c.ListRV = probeRV
			p.add(1)
			if err := emit(ctx, change.Event{Type: change.Listed, Change: c, ListTotal: max(estimate, p.listed)}); err != nil {
				return 0, errors.Join(errEmit, err)
			}
		default:
			// Changes before the initial events ended: a plain watch from probeRV.
			if p.listed == 0 {
				return 0, &errNoWatchList{fmt.Errorf("a %s event before the initial events ended", ev.typ)}
			}
			return 0, fmt.Errorf("resource %s: streaming list: a %s event before the initial-events-end bookmark", res.ID(), ev.typ)
		}
	}
}

// probe is the server's current resource version as the target reads it, and an estimate
// of how many objects it would list (0 when the server gives none: under a selector).
func (s *Stream) probe(ctx context.Context) (change.RV, int, error) {
	t := s.Target
	req := s.Clients.list.Get().AbsPath(collectionPath(t.Resource, s.namespace())).Param("limit", "1")
	if t.LabelSelector != "" {
		req = req.Param("labelSelector", t.LabelSelector)
	}
	if t.FieldSelector != "" {
		req = req.Param("fieldSelector", t.FieldSelector)
	}
	result := req.Do(ctx)
	body, err := result.Raw()
	if err != nil {
		return 0, 0, classify(t.Resource, "list", result.Error())
	}
	m := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.remainingItemCount", "items.#")
	rv, err := change.ParseRV(m[0].Str)
	if err != nil {
		return 0, 0, retry.Terminal(fmt.Errorf("resource %s: %w", t.Resource.ID(), err))
	}
	estimate := 0
	if m[1].Exists() {
		estimate = int(m[1].Int() + m[2].Int())
	}
	return rv, estimate, nil
}
