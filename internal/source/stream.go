package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// Observer is told about the stream's own events, for metrics. Nil-safe callers pass nil.
type Observer interface {
	Relist(resource string)
	Gone(resource string)
	WatchRestart(resource string)
}

// Stream lists and watches one Target.
type Stream struct {
	Clients   *Clients
	Target    Target
	PageSize  int64 // LIST page size; default 500
	Transform *Transform
	Backoff   retry.Backoff
	Log       *slog.Logger
	Observer  Observer
	// Now is the clock stamped on changes as ObservedAt; default time.Now.
	Now func() time.Time
}

// Run emits events from `from` on: a watch from that RV when it is non-zero, a relist
// first when it is zero or the server no longer has that history. It returns when ctx
// ends (nil), when emit fails, or on a terminal error (Forbidden, Unauthorized,
// NotFound), which is marked retry.Terminal.
func (s *Stream) Run(ctx context.Context, from change.RV, emit func(context.Context, change.Event) error) error {
	if s.PageSize <= 0 {
		s.PageSize = 500
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Transform == nil {
		s.Transform = &Transform{}
	}
	id := s.Target.Resource.ID()
	log := s.Log.With("resource", id)
	rv := from
	failures := 0
	for ctx.Err() == nil {
		if rv == 0 {
			s.observe(func(o Observer) { o.Relist(id) })
			listRV, err := s.relist(ctx, emit)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if retry.IsTerminal(err) || errors.Is(err, errEmit) {
					return err
				}
				d := s.Backoff.Delay(failures)
				failures++
				log.Warn("relist failed; retrying", "in", d.Round(time.Millisecond).String(), "error", err)
				sleep(ctx, d)
				continue
			}
			failures = 0
			rv = listRV
			log.Info("relisted", "resourceVersion", rv.String())
		}
		next, err := s.watch(ctx, rv, emit)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errGone):
			s.observe(func(o Observer) { o.Gone(id) })
			log.Info("watch history expired (410 Gone); relisting", "resourceVersion", next.String())
			rv = 0
		case retry.IsTerminal(err) || errors.Is(err, errEmit):
			return err
		case err != nil:
			// Anything else the watch reports heals by itself: watch again from where it
			// stopped, after a backoff.
			d := s.Backoff.Delay(failures)
			failures++
			log.Warn("watch failed; retrying", "in", d.Round(time.Millisecond).String(), "error", err)
			sleep(ctx, d)
			rv = next
		default:
			failures = 0
			rv = next
		}
	}
	return nil
}

func (s *Stream) observe(f func(Observer)) {
	if s.Observer != nil {
		f(s.Observer)
	}
}

var (
	errGone = errors.New("resource version too old")
	errEmit = errors.New("emit")
)

// classify marks an apiserver error terminal where retrying cannot help.
func classify(r change.Resource, verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return retry.Terminal(fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err))
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return retry.Terminal(fmt.Errorf("resource %s: %s: the server does not serve it (was its CRD deleted?): %w", r.ID(), verb, err))
	}
	return fmt.Errorf("resource %s: %s: %w", r.ID(), verb, err)
}

// namespaces lists the namespaces to LIST/WATCH separately: one configured namespace is
// listed through its namespaced path (so namespaced RBAC suffices); several are read
// cluster-wide and filtered here, so that one resource version orders them all.
func (s *Stream) namespace() string {
	if len(s.Target.Namespaces) == 1 {
		return s.Target.Namespaces[0]
	}
	return ""
}

func (s *Stream) wanted(ns string) bool {
	return len(s.Target.Namespaces) <= 1 || slices.Contains(s.Target.Namespaces, ns)
}

// relist emits RelistBegin, one Listed per object and RelistEnd with the LIST's RV. Pages
// are requested with limit/continue; every page is read at the first page's RV.
func (s *Stream) relist(ctx context.Context, emit func(context.Context, change.Event) error) (change.RV, error) {
	res := s.Target.Resource
	if err := emit(ctx, change.Event{Type: change.RelistBegin}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	var listRV change.RV
	cont := ""
	for {
		req := s.Clients.list.Get().AbsPath(collectionPath(res, s.namespace())).
			Param("limit", strconv.FormatInt(s.PageSize, 10))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if s.Target.LabelSelector != "" {
			req = req.Param("labelSelector", s.Target.LabelSelector)
		}
		if s.Target.FieldSelector != "" {
			req = req.Param("fieldSelector", s.Target.FieldSelector)
		}
		result := req.Do(ctx)
		body, err := result.Raw()
		if err != nil {
			err = result.Error() // decodes the apiserver's Status, whose message names the cause
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				// The continue token outlived etcd's history: start the LIST over.
				return 0, fmt.Errorf("resource %s: list continuation expired: %w", res.ID(), err)
			}
			return 0, classify(res, "list", err)
		}
		m := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.continue")
		if listRV == 0 {
			if listRV, err = change.ParseRV(m[0].Str); err != nil {
				return 0, retry.Terminal(fmt.Errorf("resource %s: %w", res.ID(), err))
			}
		}
		now := s.Now()
		var emitErr error
		// A string view of the page, not a copy: each item is copied once, below.
		gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "items").ForEach(func(_, item gjson.Result) bool {
			c, err := s.toChange([]byte(item.Raw), now)
			if err != nil {
				emitErr = err
				return false
			}
			if !s.wanted(c.Key.Namespace) {
				return true
			}
			c.Snapshot = true
			if err := emit(ctx, change.Event{Type: change.Listed, Change: c}); err != nil {
				emitErr = errors.Join(errEmit, err)
				return false
			}
			return true
		})
		if emitErr != nil {
			return 0, emitErr
		}
		cont = m[1].Str
		if cont == "" {
			break
		}
	}
	if err := emit(ctx, change.Event{Type: change.RelistEnd, RV: listRV}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	return listRV, nil
}

// toChange reads and transforms one object. The Op is left for the caller.
func (s *Stream) toChange(data []byte, now time.Time) (change.Change, error) {
	res := s.Target.Resource
	obj, m, err := s.Transform.apply(data, res.Group == "" && res.Resource == "secrets")
	if err != nil {
		return change.Change{}, fmt.Errorf("resource %s: transform %s/%s: %w", res.ID(), m.namespace, m.name, err)
	}
	rv, err := change.ParseRV(m.rv)
	if err != nil {
		return change.Change{}, retry.Terminal(fmt.Errorf("resource %s: object %s/%s: %w", res.ID(), m.namespace, m.name, err))
	}
	return change.Change{
		Resource:   res,
		Key:        change.Key{Namespace: m.namespace, Name: m.name},
		UID:        m.uid,
		RV:         rv,
		Object:     obj,
		Labels:     m.labels,
		ChangedBy:  m.changedBy,
		Time:       m.time,
		ObservedAt: now,
	}, nil
}

// watch follows the resource from rv with client-go's RetryWatcher, which re-opens the
// watch from the last delivered RV whenever it closes. It returns the last RV delivered
// and errGone when the server no longer has the history from there.
func (s *Stream) watch(ctx context.Context, rv change.RV, emit func(context.Context, change.Event) error) (change.RV, error) {
	res := s.Target.Resource
	w := &watcher{s: s}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv.String(), w)
	if err != nil {
		return rv, fmt.Errorf("resource %s: %w", res.ID(), err)
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok = <-rw.ResultChan():
		}
		if !ok {
			// The RetryWatcher gave up (it does after errors it does not know); start a
			// new one from the last RV after a backoff.
			s.observe(func(o Observer) { o.WatchRestart(res.ID()) })
			sleep(ctx, s.Backoff.Delay(0))
			return rv, nil
		}
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rv, errGone
			}
			return rv, classify(res, "watch", err)
		case watch.Added, watch.Modified, watch.Deleted:
			o := ev.Object.(*rawObject)
			if o.bookmark {
				next, err := change.ParseRV(o.rv)
				if err != nil {
					return rv, retry.Terminal(fmt.Errorf("resource %s: bookmark: %w", res.ID(), err))
				}
				rv = next
				w.healthy()
				if err := emit(ctx, change.Event{Type: change.Progress, RV: rv}); err != nil {
					return rv, errors.Join(errEmit, err)
				}
				continue
			}
			c, err := s.toChange(o.data, s.Now())
			if err != nil {
				return rv, err
			}
			w.healthy()
			rv = c.RV
			if !s.wanted(c.Key.Namespace) {
				continue
			}
			switch ev.Type {
			case watch.Added:
				c.Op = change.OpCreate
			case watch.Modified:
				c.Op = change.OpUpdate
			default:
				c.Op = change.OpDelete
			}
			if err := emit(ctx, change.Event{Type: change.Changed, Change: c}); err != nil {
				return rv, errors.Join(errEmit, err)
			}
		}
	}
}

// watcher opens watches for the RetryWatcher. It turns bookmarks into in-band events (the
// RetryWatcher swallows bookmarks, and kube-cdc checkpoints them), turns a 410 answered
// to the watch request itself into a 410 event (the RetryWatcher would retry it forever),
// and waits with exponential backoff and jitter between consecutive failed attempts.
type watcher struct {
	s        *Stream
	mu       sync.Mutex
	failures int
}

func (w *watcher) healthy() {
	w.mu.Lock()
	w.failures = 0
	w.mu.Unlock()
}

func (w *watcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w.mu.Lock()
	n := w.failures
	w.failures++
	w.mu.Unlock()
	if n > 0 {
		w.s.observe(func(o Observer) { o.WatchRestart(w.s.Target.Resource.ID()) })
		sleep(ctx, w.s.Backoff.Delay(n-1))
	}
	t := w.s.Target
	// Like client-go's reflector: end each watch after 5–10 minutes so connections recycle.
	timeout := 300 + rand.IntN(300)
	req := w.s.Clients.watch.Get().AbsPath(collectionPath(t.Resource, w.s.namespace())).
		Param("watch", "true").
		Param("resourceVersion", opts.ResourceVersion).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.Itoa(timeout))
	if t.LabelSelector != "" {
		req = req.Param("labelSelector", t.LabelSelector)
	}
	if t.FieldSelector != "" {
		req = req.Param("fieldSelector", t.FieldSelector)
	}
	wi, err := req.Watch(ctx)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: err.Error()}
			ch := make(chan watch.Event, 1)
			ch <- watch.Event{Type: watch.Error, Object: &st}
			close(ch)
			return watch.NewProxyWatcher(ch), nil
		}
		return nil, err
	}
	return watch.Filter(wi, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Bookmark {
			if o, ok := ev.Object.(*rawObject); ok {
				return watch.Event{Type: watch.Modified, Object: &rawObject{rv: o.rv, bookmark: true}}, true
			}
		}
		return ev, true
	}), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
