package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// watch follows the resource from rv, re-opening the watch from the last delivered RV
// whenever it ends, until ctx ends or the watch fails in a way re-opening cannot heal. It
// returns the last RV delivered, and errGone when the server no longer has the history
// from there, an *errBehind when the server is behind it (time travel), a Fault (the
// resource forbidden or no longer served), or the error of an event it could not turn
// into a change.
//
// Each watch response is read in this goroutine (watchstream.go): one goroutine from
// the socket to emit. It does what client-go's RetryWatcher and StreamWatcher did for
// the stream, minus their two goroutines and channels per event:
//   - a watch the server ends cleanly (its timeoutSeconds, a quiet resource with no
//     bookmark) or whose connection drops is no failure: it is re-opened at once, so a
//     quiet resource's re-opens never back off ever longer; re-opens are paced to one per
//     minRestartDelay all the same, as the RetryWatcher paced them;
//   - a failed attempt (a refused request, an ERROR event that is not 410, bytes that are
//     no watch event) is re-opened after exponential backoff with jitter (Backoff.Delay,
//     on Clock; longer if the server asked for a Retry-After); any delivered event or
//     bookmark resets the count;
//   - every re-open is a WatchRestart, and every watch request, re-opens included, is
//     preceded by the time-travel check (behind);
//   - 410 Gone, answered to the request or as an ERROR event, returns errGone; a request
//     answered Forbidden, Unauthorized or not served returns classify's Fault.
func (s *Stream) watch(ctx context.Context, rv change.RV, emit func(context.Context, change.Event) error) (change.RV, error) {
	w := &watcher{s: s, emit: emit, rv: rv}
	var started time.Time
	for n := 0; ; n++ {
		if n > 0 {
			s.observe(func(o Observer) { o.WatchRestart(s.Target.Resource.ID()) })
			pace(ctx, minRestartDelay-time.Since(started))
		}
		if w.failures > 0 {
			s.sleep(ctx, max(s.Backoff.Delay(w.failures-1), w.retryAfter))
		}
		if ctx.Err() != nil {
			return w.rv, nil
		}
		// A watch from an RV the server has not reached waits silently for it (and then
		// delivers other changes under RVs the stream already holds): before every watch,
		// re-opens after a lost connection included (an apiserver restarted on a restored
		// etcd), ask the server where it is. When that LIST fails, the watch will too,
		// and says why.
		var b *errBehind
		switch err := s.behind(ctx, w.rv); {
		case errors.As(err, &b):
			return w.rv, b
		case err != nil && ctx.Err() == nil && unanswered(err):
			// The server could not say where it is: a restarting apiserver (on a restored
			// etcd, say) refuses connections or answers 429/503 while it starts. A watch
			// opened now would skip the check the moment it matters most, and one from an
			// RV the restored server has not reached is answered after a wait, as history
			// expired, by when the server's own writes may have passed the checkpoint:
			// the restore would pass unseen. So the probe fails like a watch and is tried
			// again after the backoff.
			w.failures++
			s.Log.Warn("watch failed; re-opening it from the last resource version", "resource", s.Target.Resource.ID(),
				"resourceVersion", w.rv.String(), "failures", w.failures, "error", err)
			continue
		}
		started = time.Now()
		err := w.follow(ctx)
		var f *watchFailure
		switch {
		case ctx.Err() != nil:
			return w.rv, nil
		case err == nil:
		case errors.As(err, &f):
			w.failures++
			w.retryAfter = f.retryAfter
			s.Log.Warn("watch failed; re-opening it from the last resource version", "resource", s.Target.Resource.ID(),
				"resourceVersion", w.rv.String(), "failures", w.failures, "error", f.err)
		default:
			return w.rv, err
		}
	}
}

// minRestartDelay spaces the starts of a stream's consecutive watch requests, on the
// real clock: a server or proxy that ends every watch as soon as it is accepted must not
// be asked again in a tight loop. A watch the server ends by its timeoutSeconds (at
// least a second) is re-opened at once.
const minRestartDelay = time.Second

// pace waits d on the real clock, or until ctx ends.
func pace(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watcher is the state of one stream's watches between re-opens.
type watcher struct {
	s          *Stream
	emit       func(context.Context, change.Event) error
	rv         change.RV     // the last RV delivered: where the next watch starts
	failures   int           // failed attempts since the last delivered event
	retryAfter time.Duration // what the last failure's server asked to wait, if anything
	// established says the current watch emitted change.Established.
	established bool
}

// watchFailure is a watch that failed in a way a re-open after a backoff may heal.
type watchFailure struct {
	err        error
	retryAfter time.Duration // the server's Retry-After, if any
}

func (f *watchFailure) Error() string { return f.err.Error() }
func (f *watchFailure) Unwrap() error { return f.err }

func failure(err error) error {
	f := &watchFailure{err: err}
	if secs, ok := apierrors.SuggestsClientDelay(err); ok {
		f.retryAfter = time.Duration(secs) * time.Second
	}
	return f
}

// follow opens one watch from w.rv and emits its events until it ends. nil: the server
// ended it cleanly or the connection went away (re-open at once); a *watchFailure: re-open
// after a backoff; anything else ends the stream's watching.
func (w *watcher) follow(ctx context.Context) error {
	w.established = false
	s, res := w.s, w.s.Target.Resource
	t := s.Target
	req := s.Clients.watch.Get().AbsPath(collectionPath(res, s.namespace())).
		Param("watch", "true").
		Param("resourceVersion", w.rv.String()).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.FormatInt(s.watchTimeoutSeconds(), 10))
	if t.LabelSelector != "" {
		req = req.Param("labelSelector", t.LabelSelector)
	}
	if t.FieldSelector != "" {
		req = req.Param("fieldSelector", t.FieldSelector)
	}
	ws, err := openWatch(ctx, req)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return errGone
		}
		if err := classify(res, "watch", err); retry.IsTerminal(err) {
			return err // Forbidden, Unauthorized, not served: a Fault
		}
		return failure(fmt.Errorf("resource %s: watch: %w", res.ID(), err))
	}
	defer ws.Close()
	s.accept()
	// The stream is established (change.Established) once the watch proves good: its
	// first event is no error, or it stays open establishAfter without one. A watch from
	// an RV the server no longer has is accepted and then ends with a 410, at once.
	first := make(chan watchRead, 1)
	go func() { ev, err := ws.next(); first <- watchRead{ev, err} }()
	var r watchRead
	timer := time.NewTimer(establishAfter) // the real clock, as pace's: Clock times backoffs
	select {
	case r = <-first:
		timer.Stop()
	case <-timer.C:
		if err := w.establish(ctx); err != nil {
			return err
		}
		r = <-first // the body ends with ctx, so this read does too
	}
	for n := 0; ; n++ {
		ev, err := r.ev, r.err
		if n > 0 {
			ev, err = ws.next()
		}
		if err == nil && ev.typ != eventError && !w.established {
			if err := w.establish(ctx); err != nil {
				return err
			}
		}
		if err != nil {
			if ctx.Err() != nil || cleanEnd(err) {
				s.Log.Debug("watch ended; re-opening it from the last resource version", "resource", res.ID(),
					"resourceVersion", w.rv.String(), "reason", err)
				return nil
			}
			return failure(fmt.Errorf("resource %s: watch: %w", res.ID(), err))
		}
		switch ev.typ {
		case eventBookmark:
			next, err := change.ParseRV(gjson.GetBytes(ev.object, "metadata.resourceVersion").Str)
			if err != nil {
				return fault(res, ReasonInvalidRV, fmt.Errorf("resource %s: bookmark: %w", res.ID(), err))
			}
			w.rv, w.failures = next, 0
			if err := w.emit(ctx, change.Event{Type: change.Progress, RV: next}); err != nil {
				return errors.Join(errEmit, err)
			}
		case eventAdded, eventModified, eventDeleted:
			c, err := s.toChange(ev.object, s.Clock.Now())
			if err != nil {
				return err
			}
			w.rv, w.failures = c.RV, 0
			if !s.wanted(c.Key.Namespace) {
				continue
			}
			switch ev.typ {
			case eventAdded:
				c.Op = change.OpCreate
			case eventModified:
				c.Op = change.OpUpdate
			default:
				c.Op = change.OpDelete
				if keep := s.leftScope(ctx, &c); keep {
					continue
				}
			}
			if err := w.emit(ctx, change.Event{Type: change.Changed, Change: c}); err != nil {
				return errors.Join(errEmit, err)
			}
		case eventError:
			err := statusError(ev.object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return errGone
			}
			// As the RetryWatcher did: any other error event is re-opened after a backoff
			// (a 500, a 504 "too slow", even a Forbidden: the request was allowed).
			return failure(fmt.Errorf("resource %s: watch: error event: %w", res.ID(), err))
		default:
			return fmt.Errorf("resource %s: watch: an event of unknown type %q", res.ID(), ev.typ)
		}
	}
}

// establishAfter is how long a watch that delivers nothing must stay open, without an
// error, for its stream to count as established (on the real clock).
const establishAfter = time.Second

// watchRead is one read of a watch response.
type watchRead struct {
	ev  watchEvent
	err error
}

// establish emits change.Established from w.rv, once per watch.
func (w *watcher) establish(ctx context.Context) error {
	w.established = true
	if err := w.emit(ctx, change.Event{Type: change.Established, RV: w.rv}); err != nil {
		return errors.Join(errEmit, err)
	}
	return nil
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
	case ctx.Err() != nil:
		// Stopping: nothing is written for this DELETED (not a delete the lookup could
		// not settle); its watch is resumed from the checkpoint, before it, next time.
		return true
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
