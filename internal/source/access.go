package source

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// streamVerbs are the verbs a stream reads a resource with: it LISTs (a relist), then
// WATCHes. A user who may list but not watch passes the LIST, writes the whole snapshot
// and only then fails, so both are asked for.
var streamVerbs = []string{"list", "watch"}

// Access is what the apiserver's authorizer says now of the verbs a target is read with,
// where its stream reads it.
type Access struct {
	// Where the stream reads: "cluster-wide", or "in namespace NS" for a target of one
	// namespace (Resolve gives each configured namespace a target of its own).
	Where string
	// Allowed are the verbs the user may use, Denied the others, each in the order
	// list, watch.
	Allowed, Denied []string
	// Reasons are what an authorizer said of a denial. RBAC denies by having no opinion
	// and says nothing; another authorizer (a webhook) may say why.
	Reasons []string
}

// ReviewAccess asks the apiserver, one SelfSubjectAccessReview per verb, whether the
// user of cs may list and watch target t where its stream does: in its namespace for a
// target of one namespace, else cluster-wide. `kube-cdc check`, `run`'s start and the
// running AccessCheck all ask through it. An error is a review the apiserver could not
// answer, not a denial.
func ReviewAccess(ctx context.Context, cs kubernetes.Interface, t Target) (Access, error) {
	ns, a := "", Access{Where: "cluster-wide"}
	switch {
	case len(t.Namespaces) == 1:
		ns = t.Namespaces[0]
		a.Where = "in namespace " + ns
	case len(t.Namespaces) > 1:
		a.Where = "cluster-wide (namespaces " + strings.Join(t.Namespaces, ", ") + " are read through one cluster-wide list and watch)"
	}
	attrs := authv1.ResourceAttributes{Group: t.Resource.Group, Resource: t.Resource.Resource, Namespace: ns}
	verdict, err := ReviewVerbs(ctx, cs, attrs, streamVerbs)
	if err != nil {
		return Access{}, fmt.Errorf("access review of %s: %w", t.Resource.ID(), err)
	}
	a.Allowed, a.Denied, a.Reasons = verdict.Allowed, verdict.Denied, verdict.Reasons
	return a, nil
}

// ReviewVerbs asks, one SelfSubjectAccessReview per verb, whether the user of cs may use
// each of verbs on what attrs names (its Verb is set per verb). ReviewAccess asks it of a
// stream's target; the signal server (internal/signal) of its ConfigMap. The Access has
// no Where: the caller knows where it asked. An error is a review the apiserver could not
// answer, not a denial.
func ReviewVerbs(ctx context.Context, cs kubernetes.Interface, attrs authv1.ResourceAttributes, verbs []string) (Access, error) {
	var a Access
	for _, verb := range verbs {
		ra := attrs
		ra.Verb = verb
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra},
		}, metav1.CreateOptions{})
		if err != nil {
			return Access{}, fmt.Errorf("%s: %w", verb, err)
		}
		if r.Status.Allowed {
			a.Allowed = append(a.Allowed, verb)
			continue
		}
		a.Denied = append(a.Denied, verb)
		for _, s := range []string{r.Status.Reason, r.Status.EvaluationError} {
			if s != "" {
				a.Reasons = append(a.Reasons, s)
			}
		}
	}
	return a, nil
}

// AccessObserver is told what AccessCheck finds, for metrics and `kube-cdc status`.
type AccessObserver interface {
	// AccessDenied records that the verbs denied may no longer be used on resource
	// (one scope of it) where the stream reads it, since `since`, with a message that
	// says so; no verbs records that every verb is allowed again.
	AccessDenied(resource, scope string, denied []string, detail string, since time.Time)
}

// AccessCheck asks, every Interval, whether each target may still be listed and
// watched (ReviewAccess: two SelfSubjectAccessReviews per target). The apiserver asks
// RBAC when a watch opens, not while it streams: a RoleBinding revoked under an open
// watch goes unnoticed until the watch is re-opened (its 5–10 minute timeout), and the
// resource degrades only then. AccessCheck says it before: a warn line naming the
// resource and the verbs denied, and the Observer, while the data keeps flowing.
type AccessCheck struct {
	Client   kubernetes.Interface
	Targets  []Target
	Interval time.Duration // 0: no check; Run only waits for ctx
	Log      *slog.Logger
	Observer AccessObserver // nil: the log only
	Clock    clock.WithTicker
}

// accessState is what the last answered review said of one target.
type accessState struct {
	denied []string
	since  time.Time
}

// Run checks every Interval until ctx ends, then clears what it reported (a process
// that no longer streams, e.g. a lost lease, knows nothing of access) and returns nil.
func (c *AccessCheck) Run(ctx context.Context) error {
	if c.Interval <= 0 || len(c.Targets) == 0 {
		<-ctx.Done()
		return nil
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	states := make([]accessState, len(c.Targets))
	defer func() {
		for i, t := range c.Targets {
			if len(states[i].denied) > 0 && c.Observer != nil {
				c.Observer.AccessDenied(t.Resource.ID(), t.Resource.Scope, nil, "", time.Time{})
			}
		}
	}()
	tick := c.Clock.NewTicker(c.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		for i, t := range c.Targets {
			if ctx.Err() != nil {
				return nil
			}
			c.check(ctx, t, &states[i])
		}
	}
}

// check asks about t once and reports a change from what st holds: a warning when a
// verb is denied (again, or another), an info line when every verb is allowed again. A
// review the apiserver could not answer changes nothing.
func (c *AccessCheck) check(ctx context.Context, t Target, st *accessState) {
	a, err := ReviewAccess(ctx, c.Client, t)
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Debug("cannot ask the apiserver whether a resource may still be read", "resource", t.Resource.ID(),
				"scope", t.Resource.Scope, "error", err)
		}
		return
	}
	if slices.Equal(a.Denied, st.denied) {
		return
	}
	now := c.Clock.Now()
	if len(a.Denied) == 0 {
		c.Log.Info("access restored: the resource may be listed and watched again", "resource", t.Resource.ID(),
			"scope", t.Resource.Scope, "deniedFor", now.Sub(st.since).Round(time.Second).String())
		*st = accessState{}
		if c.Observer != nil {
			c.Observer.AccessDenied(t.Resource.ID(), t.Resource.Scope, nil, "", time.Time{})
		}
		return
	}
	if len(st.denied) == 0 {
		st.since = now
	}
	st.denied = a.Denied
	detail := fmt.Sprintf("%s %s not allowed %s: the open watch streams on, but its next re-open (or relist) will fail and degrade the resource",
		strings.Join(a.Denied, ", "), t.Resource.ID(), a.Where)
	if len(a.Reasons) > 0 {
		detail += " (" + strings.Join(a.Reasons, "; ") + ")"
	}
	c.Log.Warn("access lost: the resource streams on until its watch is re-opened, which will then fail", "resource", t.Resource.ID(),
		"scope", t.Resource.Scope, "missing", strings.Join(a.Denied, ","), "where", a.Where, "error", detail)
	if c.Observer != nil {
		c.Observer.AccessDenied(t.Resource.ID(), t.Resource.Scope, a.Denied, detail, st.since)
	}
}
