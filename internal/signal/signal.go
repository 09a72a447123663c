package signal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
)

// ConfigMapName is the signal ConfigMap of the deployment whose Lease is named lease.
func ConfigMapName(lease string) string { return lease + "-signals" }

// Request asks the leader to relist and reconcile Resources (all when empty) into every
// sink; Full writes every listed object again as a snapshot.
type Request struct {
	ID          string    `json:"id"`
	Resources   []string  `json:"resources,omitempty"`
	Full        bool      `json:"full,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
}

// Outcome is what the relist of one resource (scope) did in one sink.
type Outcome struct {
	Sink     string         `json:"sink"`
	Resource string         `json:"resource"`
	Scope    string         `json:"scope,omitempty"`
	Listed   int            `json:"listed"`
	Written  int            `json:"written"`
	Deleted  int            `json:"deleted"`
	Drift    map[string]int `json:"drift,omitempty"`
	Skipped  string         `json:"skipped,omitempty"`
}

// States of a Result.
const (
	StateRunning = "running"
	StateDone    = "done"
	StateFailed  = "failed"
)

// Result is the leader's answer to a Request.
type Result struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	By       string    `json:"by"` // the replica that answered
	Error    string    `json:"error,omitempty"`
	Outcomes []Outcome `json:"outcomes,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

const (
	requestPrefix = "request."
	resultPrefix  = "result."
)

// Relister is what Serve needs of the pipeline.
type Relister interface {
	Relist(ctx context.Context, resources []string, full bool) ([]Outcome, error)
}

// Serve answers the requests of ConfigMap ns/name, one at a time, until ctx ends: every
// request without a final result (one left "running" by a replica that lost the lease is
// answered again). Run it only while leading.
//
// Requests arrive by a watch of the ConfigMap and, every PollInterval, by a read of it: a
// watch resumed from a resource version the cluster no longer reaches (an etcd restored
// from a backup goes back below it) delivers nothing for a long while, and a request
// written then must not wait for it.
func Serve(ctx context.Context, cs kubernetes.Interface, ns, name, identity string, r Relister, log *slog.Logger) error {
	return serve(ctx, cs, ns, name, identity, r, log, PollInterval)
}

// PollInterval is how often Serve reads the ConfigMap besides watching it.
const PollInterval = 10 * time.Second

func serve(ctx context.Context, cs kubernetes.Interface, ns, name, identity string, r Relister, log *slog.Logger, poll time.Duration) error {
	// A request the apiserver refuses (RBAC, or a token no longer valid) ends Serve with
	// its error at once: retried, it would fail again every few seconds, and Server says
	// it once and asks again when access returns.
	outer := ctx
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	answered := map[string]bool{}
	var mu sync.Mutex // one request at a time, whichever path found it
	handle := func(cm *corev1.ConfigMap) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for key, raw := range cm.Data {
			id, ok := strings.CutPrefix(key, requestPrefix)
			if !ok || answered[id] {
				continue
			}
			if res, ok := resultOf(cm, id); ok && res.State != StateRunning {
				answered[id] = true
				continue
			}
			answered[id] = true
			var req Request
			if err := json.Unmarshal([]byte(raw), &req); err != nil {
				log.Warn("ignoring a malformed resnapshot request", "configmap", ns+"/"+name, "key", key, "error", err)
				continue
			}
			res := Result{ID: id, State: StateRunning, By: identity, Started: time.Now().UTC()}
			if err := setKey(ctx, cs, ns, name, resultPrefix+id, res, false); err != nil {
				return false, err
			}
			log.Info("resnapshot requested", "id", id, "resources", req.Resources, "full", req.Full)
			out, err := r.Relist(ctx, req.Resources, req.Full)
			if ctx.Err() != nil {
				return true, nil // a successor answers it
			}
			res.State, res.Outcomes, res.Finished = StateDone, out, time.Now().UTC()
			if err != nil {
				res.State, res.Error = StateFailed, err.Error()
			}
			log.Info("resnapshot answered", "id", id, "state", res.State, "error", res.Error)
			if err := setKey(ctx, cs, ns, name, resultPrefix+id, res, false); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	defer func() { stopPoll(); <-polled }()
	go func() {
		defer close(polled)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
			// The read outlives a stop (Serve waits for it): a request cut by its context
			// makes client-go log an error, and a clean shutdown logs none.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(pctx), poll)
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(gctx, name, metav1.GetOptions{})
			cancel()
			if err == nil {
				_, err = handle(cm)
			}
			if refused(err) && pctx.Err() == nil {
				refuse(fmt.Errorf("read configmap %s/%s: %w", ns, name, err))
				return
			}
			if err != nil && !apierrors.IsNotFound(err) && pctx.Err() == nil {
				log.Warn("cannot read the resnapshot requests; trying again", "configmap", ns+"/"+name, "in", poll.String(), "error", err)
			}
		}
	}()
	err := watchConfigMap(ctx, cs, ns, name, handle, func() {
		log.Info("answering resnapshot requests", "configmap", ns+"/"+name)
	})
	if cause := context.Cause(ctx); outer.Err() == nil && cause != nil && refused(cause) {
		return cause
	}
	return err
}

// refused says whether err is the apiserver refusing a request: Forbidden (RBAC) or
// Unauthorized (the credentials).
func refused(err error) bool {
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err))
}

// Ask writes req (a new ID when empty) into ConfigMap ns/name, creating it when missing,
// and waits until the leader answers it (done or failed) or ctx ends; then it removes the
// request and its result.
func Ask(ctx context.Context, cs kubernetes.Interface, ns, name string, req Request) (Result, error) {
	if req.ID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		req.ID = time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b)
	}
	if req.RequestedAt.IsZero() {
		req.RequestedAt = time.Now().UTC()
	}
	if err := setKey(ctx, cs, ns, name, requestPrefix+req.ID, req, true); err != nil {
		return Result{}, err
	}
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = deleteKeys(dctx, cs, ns, name, requestPrefix+req.ID, resultPrefix+req.ID)
	}
	var res Result
	err := watchConfigMap(ctx, cs, ns, name, func(cm *corev1.ConfigMap) (bool, error) {
		r, ok := resultOf(cm, req.ID)
		if ok && r.State != StateRunning {
			res = r
			return true, nil
		}
		return false, nil
	}, nil)
	if err != nil {
		cleanup()
		return Result{}, err
	}
	if ctx.Err() != nil {
		cleanup()
		return Result{}, fmt.Errorf("no answer from a running kube-cdc (is one running and leading, with RBAC to read and update configmap %s/%s?): %w",
			ns, name, context.Cause(ctx))
	}
	cleanup()
	return res, nil
}

func resultOf(cm *corev1.ConfigMap, id string) (Result, bool) {
	raw, ok := cm.Data[resultPrefix+id]
	if !ok {
		return Result{}, false
	}
	var r Result
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Result{}, false
	}
	return r, true
}

// listsGrace bounds how long watchConfigMap waits for a list in flight when it returns.
const listsGrace = 10 * time.Second

// watchConfigMap calls f with ns/name whenever it changes (and once at start, when it
// exists) until f says done, f fails, the apiserver refuses to list or watch it (that
// error then) or ctx ends (nil then).
//
// The informer's requests do not end with ctx but after UntilWithSync returns, which is
// after its informer has stopped: the reflector stops its watch itself, as a clean stop.
// A watch whose request ctx cancelled first ended with an error the reflector logged as
// "Warning: watch ended with error … context canceled" on every SIGTERM.
//
// A refused list or watch is not handed to the reflector: it would log it at ERROR
// ("Failed to watch … forbidden") and try again every second or two, for as long as the
// grant is missing. The refusal ends the wait instead, and the reflector is handed
// nothing it would log: a list that returns only once the reflector stopped waiting for
// it, a watch that delivers nothing until the reflector stops.
//
// synced, when set, is called once the ConfigMap has been listed and the watch is about
// to open (the informer synced): a server says from then on that it answers.
func watchConfigMap(ctx context.Context, cs kubernetes.Interface, ns, name string, f func(*corev1.ConfigMap) (bool, error), synced func()) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// A list the reflector started just before it stopped is let finish before its
	// context is cancelled: cut while its body is read, client-go logs "Unexpected error
	// when reading response body … context canceled" at ERROR (seen under load when the
	// grant was revoked). A list takes milliseconds; the wait is bounded all the same.
	//
	// A list the reflector starts once the wait has begun (its goroutine outlives the
	// informer) is not sent at all: it would be cut the moment it starts. It gets an empty
	// list, which the stopped reflector discards.
	var (
		lists   sync.WaitGroup
		mu      sync.Mutex
		closing bool
	)
	defer func() {
		mu.Lock()
		closing = true
		mu.Unlock()
		done := make(chan struct{})
		go func() { lists.Wait(); close(done) }()
		t := time.NewTimer(listsGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		cancel()
	}()
	wctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			mu.Lock()
			if closing {
				mu.Unlock()
				return &corev1.ConfigMapList{}, nil
			}
			lists.Add(1)
			mu.Unlock()
			l, err := cs.CoreV1().ConfigMaps(ns).List(reqCtx, o)
			lists.Done()
			if refused(err) {
				refuse(fmt.Errorf("list configmap %s/%s: %w", ns, name, err))
				<-reqCtx.Done() // the reflector runs its list in a goroutine it does not wait for
			}
			return l, err
		},
		WatchFuncWithContext: func(rctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(reqCtx, o)
			if refused(err) {
				refuse(fmt.Errorf("watch configmap %s/%s: %w", ns, name, err))
				<-rctx.Done() // the reflector's: it ends once UntilWithSync stops the informer
				return watch.NewFake(), nil
			}
			return w, err
		},
	}
	var ferr error
	var precondition watchtools.PreconditionFunc
	if synced != nil {
		precondition = func(cache.Store) (bool, error) { synced(); return false, nil }
	}
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.ConfigMap{}, precondition, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		done, err := f(cm)
		if err != nil {
			ferr = err
			return true, nil
		}
		return done, nil
	})
	if ferr != nil {
		return ferr
	}
	if cause := context.Cause(wctx); ctx.Err() == nil && cause != nil && refused(cause) {
		return cause
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, watchtools.ErrWatchClosed) {
		return fmt.Errorf("watch configmap %s/%s: %w", ns, name, err)
	}
	return nil
}

// setKey stores v as JSON under key of ConfigMap ns/name; create makes the ConfigMap
// when it is missing.
func setKey(ctx context.Context, cs kubernetes.Interface, ns, name, key string, v any, create bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/name": "kube-cdc", "app.kubernetes.io/component": "signals"}},
				Data: map[string]string{key: string(b)}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = string(b)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s into configmap %s/%s: %w", key, ns, name, err)
	}
	return nil
}

func deleteKeys(ctx context.Context, cs kubernetes.Interface, ns, name string, keys ...string) error {
	cms := cs.CoreV1().ConfigMaps(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, k := range keys {
			delete(cm.Data, k)
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
