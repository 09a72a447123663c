package signal

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/source"
)

// ServeVerbs are what the leader does with the signal ConfigMap: get (the poll), list and
// watch (by name), update (the results). `kube-cdc check` asks for the same.
var ServeVerbs = []string{"get", "list", "watch", "update"}

// ReviewAccess asks the apiserver whether the user of cs may do ServeVerbs on ConfigMap
// ns/name (source.ReviewVerbs, as the streams' access is asked). An error is a review the
// apiserver could not answer, not a denial.
func ReviewAccess(ctx context.Context, cs kubernetes.Interface, ns, name string) (source.Access, error) {
	a, err := source.ReviewVerbs(ctx, cs, authv1.ResourceAttributes{Resource: "configmaps", Namespace: ns, Name: name}, ServeVerbs)
	if err != nil {
		return source.Access{}, fmt.Errorf("access review of configmap %s/%s: %w", ns, name, err)
	}
	a.Where = "in namespace " + ns
	return a, nil
}

// Denial says what a denied Access to ConfigMap ns/name costs and which grant is missing:
// the message of Server's warning, its Observer's detail and `kube-cdc check`'s row.
func Denial(a source.Access, ns, name string) string {
	msg := fmt.Sprintf("%s configmaps/%s not allowed %s: resnapshot requests (kube-cdc resnapshot) are not answered; grant %s on that ConfigMap (a Role with resourceNames [%s]) to answer them",
		strings.Join(a.Denied, ", "), name, a.Where, strings.Join(ServeVerbs, ", "), name)
	if len(a.Reasons) > 0 {
		msg += " (" + strings.Join(a.Reasons, "; ") + ")"
	}
	return msg
}

// AccessObserver is told what Server finds of its access, for metrics and `kube-cdc
// status`.
type AccessObserver interface {
	// SignalsDenied records that the verbs denied may not be used on configMap
	// ("namespace/name") since `since`, so resnapshot requests go unanswered, with a
	// message that says so; no verbs records that they are answered again.
	SignalsDenied(configMap string, denied []string, detail string, since time.Time)
}

// Server answers the resnapshot requests of ConfigMap Namespace/Name (Serve) while RBAC
// lets it. It asks first (ReviewAccess): without a verb of ServeVerbs it serves nothing,
// says so once (a warning naming the missing grant and what it disables, and the
// Observer), and asks again every Recheck; when access returns it says so (an info line)
// and serves. While serving it asks every Recheck too, and a request the apiserver
// refuses ends serving at once: a grant revoked under an open watch is found before the
// watch re-opens, and a refusal is said once instead of being retried (and logged by
// client-go at ERROR) every second or two.
type Server struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Identity  string // the replica that answers, in each Result
	Relister  Relister
	Log       *slog.Logger
	Observer  AccessObserver // nil: the log only
	// Recheck is how often access is asked again (kubernetes.accessCheckInterval). 0
	// turns the periodic review off while serving; while denied, access is then asked
	// again every minute.
	Recheck time.Duration
	Clock   clock.WithTicker // nil: the real clock
	poll    time.Duration    // Serve's read of the ConfigMap (PollInterval); tests shorten it
}

// deniedRecheck is how often a Server whose Recheck is 0 asks again while denied.
const deniedRecheck = time.Minute

// Run serves until ctx ends, then clears what it reported and returns nil. An error is
// Serve's, other than a refusal: serving stops then.
func (s *Server) Run(ctx context.Context) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.poll == 0 {
		s.poll = PollInterval
	}
	cm := s.Namespace + "/" + s.Name
	var denied []string // what was last reported
	var since time.Time
	defer func() {
		if len(denied) > 0 && s.Observer != nil {
			s.Observer.SignalsDenied(cm, nil, "", time.Time{})
		}
	}()
	report := func(a source.Access) {
		if slices.Equal(a.Denied, denied) {
			return
		}
		if len(denied) == 0 {
			since = s.Clock.Now()
		}
		denied = a.Denied
		detail := Denial(a, s.Namespace, s.Name)
		s.Log.Warn("resnapshot requests are not answered: the signal ConfigMap may not be read and written", "configmap", cm,
			"missing", strings.Join(a.Denied, ","), "where", a.Where, "error", detail)
		if s.Observer != nil {
			s.Observer.SignalsDenied(cm, a.Denied, detail, since)
		}
	}
	for {
		a, err := ReviewAccess(ctx, s.Client, s.Namespace, s.Name)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// As a stream does (source.MayStream): serve, and let the requests find out.
			s.Log.Debug("cannot ask the apiserver whether the signal ConfigMap may be read; answering anyway", "configmap", cm, "error", err)
		case len(a.Denied) > 0:
			report(a)
			if !s.wait(ctx, s.deniedInterval()) {
				return nil
			}
			continue
		}
		if len(denied) > 0 && err == nil {
			s.Log.Info("access restored: resnapshot requests are answered again", "configmap", cm,
				"deniedFor", s.Clock.Since(since).Round(time.Second).String())
			denied = nil
			if s.Observer != nil {
				s.Observer.SignalsDenied(cm, nil, "", time.Time{})
			}
		}
		a, err = s.serve(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case len(a.Denied) > 0: // the periodic review
			report(a)
		case refused(err):
			// Asked at once, so that a grant revoked is said as a missing grant.
			if r, rerr := ReviewAccess(ctx, s.Client, s.Namespace, s.Name); rerr == nil && len(r.Denied) > 0 {
				report(r)
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			// The apiserver refused a request the review allows: something else than
			// RBAC refuses (an admission webhook), or the credentials. Said, and tried
			// again after a while.
			s.Log.Warn("the apiserver refused a request on the signal ConfigMap that RBAC allows: resnapshot requests are not answered for now; trying again",
				"configmap", cm, "in", s.deniedInterval().String(), "error", err)
		default:
			return err
		}
		if !s.wait(ctx, s.deniedInterval()) {
			return nil
		}
	}
}

func (s *Server) deniedInterval() time.Duration {
	if s.Recheck > 0 {
		return s.Recheck
	}
	return deniedRecheck
}

// wait waits d; false when ctx ended first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	t := s.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// serve runs Serve until ctx ends, Serve returns, or the review every Recheck finds a verb
// denied (that Access then).
func (s *Server) serve(ctx context.Context) (source.Access, error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	found := make(chan source.Access, 1)
	reviewed := make(chan struct{})
	go func() {
		defer close(reviewed)
		if s.Recheck <= 0 {
			return
		}
		tick := s.Clock.NewTicker(s.Recheck)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C():
			}
			if a, err := ReviewAccess(sctx, s.Client, s.Namespace, s.Name); err == nil && len(a.Denied) > 0 {
				found <- a
				stop()
				return
			}
		}
	}()
	err := serve(sctx, s.Client, s.Namespace, s.Name, s.Identity, s.Relister, s.Log, s.poll)
	stop()
	<-reviewed
	select {
	case a := <-found:
		return a, nil
	default:
		return source.Access{}, err
	}
}
