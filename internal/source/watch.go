package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

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
			s.sleep(ctx, s.Backoff.Delay(0))
			return rv, nil
		}
		switch ev.Type {
		case watch.Error:
			if f := w.takeFault(); f != nil {
				return rv, f
			}
			if b := w.takeBehind(); b != nil {
				return rv, b
			}
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
					return rv, fault(res, ReasonInvalidRV, fmt.Errorf("resource %s: bookmark: %w", res.ID(), err))
				}
				rv = next
				w.healthy()
				if err := emit(ctx, change.Event{Type: change.Progress, RV: rv}); err != nil {
					return rv, errors.Join(errEmit, err)
				}
				continue
			}
			c, err := s.toChange(o.data, s.Clock.Now())
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
				if keep := s.leftScope(ctx, &c); keep {
					continue
				}
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
// and waits with exponential backoff and jitter between consecutive failed attempts. A
// watch the server ends cleanly (its timeout, a quiet resource with no bookmark) is no
// failure: it is re-opened at once (client-go's RetryWatcher paces re-opens to one a
// second), so a quiet resource's re-opens do not back off ever longer.
//
// A watch request the server answers "not served" (404, 405: the CRD was deleted) would
// be retried by the RetryWatcher forever, unseen; the watcher keeps it as a Fault and
// ends the RetryWatcher with an error event, on which the stream returns the Fault.
type watcher struct {
	s        *Stream
	mu       sync.Mutex
	opened   bool  // a watch was opened before: each later one is a restart
	failures int   // failed attempts (refused requests, error events) since the last event
	fault    error // a Fault the last watch request was answered with, until taken
	behind   error // an *errBehind found before the last watch request, until taken
}

// takeBehind returns the *errBehind found before a watch request, if any, and forgets it.
func (w *watcher) takeBehind() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.behind
	w.behind = nil
	return b
}

// takeFault returns the Fault a watch request was answered with, if any, and forgets it.
func (w *watcher) takeFault() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.fault
	w.fault = nil
	return f
}

func (w *watcher) healthy() {
	w.mu.Lock()
	w.failures = 0
	w.mu.Unlock()
}

func (w *watcher) failed() {
	w.mu.Lock()
	w.failures++
	w.mu.Unlock()
}

func (w *watcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w.mu.Lock()
	restart, n := w.opened, w.failures
	w.opened = true
	w.mu.Unlock()
	if restart {
		w.s.observe(func(o Observer) { o.WatchRestart(w.s.Target.Resource.ID()) })
	}
	if n > 0 {
		w.s.sleep(ctx, w.s.Backoff.Delay(n-1))
	}
	// A watch from an RV the server has not reached waits silently for it (and then
	// delivers other changes under RVs the stream already holds): before every watch,
	// including the RetryWatcher's re-opens after a lost connection (an apiserver
	// restarted on a restored etcd), ask the server where it is. When the LIST fails,
	// the watch will too, and says why.
	if from, err := change.ParseRV(opts.ResourceVersion); err == nil {
		var b *errBehind
		if err := w.s.behind(ctx, from); errors.As(err, &b) {
			w.mu.Lock()
			w.behind = b
			w.mu.Unlock()
			return errorEvent(b), nil // the RetryWatcher passes a 410 event on and stops
		}
	}
	t := w.s.Target
	timeout := w.s.watchTimeoutSeconds()
	req := w.s.Clients.watch.Get().AbsPath(collectionPath(t.Resource, w.s.namespace())).
		Param("watch", "true").
		Param("resourceVersion", opts.ResourceVersion).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.FormatInt(timeout, 10))
	if t.LabelSelector != "" {
		req = req.Param("labelSelector", t.LabelSelector)
	}
	if t.FieldSelector != "" {
		req = req.Param("fieldSelector", t.FieldSelector)
	}
	wi, err := req.Watch(ctx)
	if err != nil {
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			return errorEvent(err), nil
		case notServed(err):
			w.mu.Lock()
			w.fault = classify(t.Resource, "watch", err)
			w.mu.Unlock()
			// The RetryWatcher passes on (and stops at) only a 410 error event; the stream
			// takes the Fault before it looks at the event.
			return errorEvent(err), nil
		}
		w.failed()
		return nil, err
	}
	w.s.accept()
	return watch.Filter(wi, func(ev watch.Event) (watch.Event, bool) {
		switch ev.Type {
		case watch.Error:
			w.failed() // the RetryWatcher re-opens after most error events
		case watch.Bookmark:
			if o, ok := ev.Object.(*rawObject); ok {
				return watch.Event{Type: watch.Modified, Object: &rawObject{rv: o.rv, bookmark: true}}, true
			}
		}
		return ev, true
	}), nil
}

// errorEvent is a watch that delivers one 410 error event, with err's message, and
// ends: what the RetryWatcher passes on to the stream rather than retrying.
func errorEvent(err error) watch.Interface {
	st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: err.Error()}
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: &st}
	close(ch)
	return watch.NewProxyWatcher(ch)
}

// watchTimeoutSeconds is WatchTimeout in whole seconds (at least 1), or by default 5–10
// minutes at random, like client-go's reflector, so that connections recycle.
func (s *Stream) watchTimeoutSeconds() int64 {
	if s.WatchTimeout > 0 {
		return max(1, int64((s.WatchTimeout+time.Second-1)/time.Second))
	}
	return 300 + rand.Int64N(300)
}

// verdictAttempts bounds the lookups of one DELETED event: the watch must go on.
const verdictAttempts = 3

// leftScope tells, for a DELETED event of a watch under a selector, whether the object
// was deleted or only stopped matching the selector (the apiserver sends DELETED for
// both). It returns true when an object under the key is in some scope (this one again,
// or another: that scope's stream writes it, so this one writes nothing), and marks c an
// inferred delete with ReasonOutOfScope when the object exists in no scope. A deleted
// object stays an observed delete, and so does any DELETED the lookup cannot settle.
func (s *Stream) leftScope(ctx context.Context, c *change.Change) (keep bool) {
	if s.Scopes == nil || s.Target.LabelSelector == "" && s.Target.FieldSelector == "" {
		return false
	}
	var verdict string
	var err error
	for attempt := range verdictAttempts {
		if attempt > 0 {
			s.sleep(ctx, s.Backoff.Delay(attempt-1))
		}
		if verdict, err = s.Scopes.Verdict(ctx, c.Key, c.UID); err == nil || ctx.Err() != nil {
			break
		}
	}
	switch {
	case err != nil:
		s.Log.Warn("watch: cannot tell whether a DELETED object was deleted or left the selector; recording a delete",
			"resource", s.Target.Resource.ID(), "key", c.Key.String(), "error", err)
		return false
	case verdict == "":
		return true
	case verdict == change.ReasonOutOfScope:
		c.Inferred, c.Reason = true, change.ReasonOutOfScope
	}
	return false
}
