package signal_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Issue 33 (4): a leader without RBAC on its signal ConfigMap made client-go log
// `Failed to watch … is forbidden` at ERROR every second or two. These run against a
// real kube-apiserver with a user whose grants the test changes.

// observer records what a Server tells its AccessObserver.
type observer struct {
	mu     sync.Mutex
	denied []string
	calls  int
}

func (o *observer) SignalsDenied(_ string, denied []string, _ string, _ time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.denied, o.calls = slices.Clone(denied), o.calls+1
}

func (o *observer) state() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.denied
}

// oneOutcome answers every request with one outcome.
type oneOutcome struct{}

func (oneOutcome) Relist(context.Context, []string, bool) ([]signal.Outcome, error) {
	return []signal.Outcome{{Sink: "wh", Resource: "configmaps", Listed: 1}}, nil
}

// signalsUser is a user without any grant, its client counting its access reviews.
func signalsUser(t *testing.T, kube *testenv.Kube, name string) (kubernetes.Interface, *atomic.Int64) {
	t.Helper()
	cfg, _, err := kube.RestrictedUser(context.Background(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	reviews := &atomic.Int64{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/selfsubjectaccessreviews") {
				reviews.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, reviews
}

// grant lets user get, list, watch and update ConfigMap ns/name, by name (the Helm
// chart's Role), and waits until the authorizer says so; revoke (the func returned)
// deletes the RoleBinding and waits until it says otherwise.
func grant(t *testing.T, kube *testenv.Kube, ns, name, user string) (revoke func()) {
	t.Helper()
	ctx := context.Background()
	rbac := kube.Clientset().RbacV1()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "signals-" + user}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
		Resources: []string{"configmaps"}, ResourceNames: []string{name}, Verbs: signal.ServeVerbs}}}
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: "kube-cdc-testenv"}}}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed := func(want bool) {
		t.Helper()
		waitFor(t, 30*time.Second, func() error {
			for _, verb := range signal.ServeVerbs {
				r, err := kube.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:               "system:serviceaccount:kube-cdc-testenv:" + user,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps", Name: name},
				}}, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				if r.Status.Allowed != want {
					return fmt.Errorf("%s configmaps/%s allowed: %v, want %v", verb, name, r.Status.Allowed, want)
				}
			}
			return nil
		})
	}
	allowed(true)
	return func() {
		t.Helper()
		if err := rbac.RoleBindings(ns).Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		allowed(false)
	}
}

// waitFor polls cond until it returns nil, failing the test with its last error after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// namespaceFor creates namespace name.
func namespaceFor(t *testing.T, kube *testenv.Kube, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.Clientset().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// clientGoLogs is a context whose client-go log lines go to the buffer returned.
func clientGoLogs() (context.Context, *syncBuffer) {
	buf := &syncBuffer{}
	return klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(buf)))), buf
}

func TestAServerWithoutItsGrantSaysSoOnceAnswersOnceGrantedAndStopsAnsweringWhenItIsRevoked(t *testing.T) {
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	ns := namespaceFor(t, kube, "signals-access")
	const name, user = "kube-cdc-signals", "signals-leader"
	cs, reviews := signalsUser(t, kube, user)
	base, clientGo := clientGoLogs()
	logs := &syncBuffer{}
	obs := &observer{}
	s := &signal.Server{Client: cs, Namespace: ns, Name: name, Identity: "leader-0", Relister: oneOutcome{},
		Log: slog.New(slog.NewTextHandler(logs, nil)), Observer: obs, Recheck: 100 * time.Millisecond}
	signal.SetPoll(s, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(base)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return within 30s of its context's end")
		}
	}()

	// Denied from the start: said once, however often it is asked again.
	waitFor(t, 30*time.Second, func() error {
		if got := obs.state(); !slices.Equal(got, signal.ServeVerbs) {
			return fmt.Errorf("observer: denied %v, want %v", got, signal.ServeVerbs)
		}
		return nil
	})
	asked := reviews.Load()
	waitFor(t, 30*time.Second, func() error { // ten checks more
		if n := reviews.Load() - asked; n < int64(10*len(signal.ServeVerbs)) {
			return fmt.Errorf("%d access reviews since the denial was said", n)
		}
		return nil
	})
	if n := strings.Count(logs.String(), `level=WARN msg="resnapshot requests are not answered: the signal ConfigMap may not be read and written"`); n != 1 {
		t.Errorf("%d warnings saying requests are not answered after ten checks, want 1:\n%s", n, logs)
	}
	if out := clientGo.String(); out != "" {
		t.Errorf("client-go logged while access was denied:\n%s", out)
	}

	// Granted: said, and a request is answered.
	revoke := grant(t, kube, ns, name, user)
	waitFor(t, 30*time.Second, func() error {
		if got := obs.state(); got != nil {
			return fmt.Errorf("observer: denied %v after the grant", got)
		}
		return nil
	})
	if n := strings.Count(logs.String(), `msg="access restored: resnapshot requests are answered again"`); n != 1 {
		t.Errorf("%d info lines saying requests are answered again, want 1:\n%s", n, logs)
	}
	actx, acancel := context.WithTimeout(context.Background(), time.Minute)
	res, err := signal.Ask(actx, kube.Clientset(), ns, name, signal.Request{})
	acancel()
	if err != nil || res.State != signal.StateDone || res.By != "leader-0" || len(res.Outcomes) != 1 {
		t.Fatalf("Ask after the grant: %+v, %v; want done by leader-0 with one outcome", res, err)
	}

	// Revoked under the open watch: found (by the review every Recheck, or a request
	// refused), said, and serving stops without a word from client-go.
	revoke()
	waitFor(t, 30*time.Second, func() error {
		if got := obs.state(); !slices.Equal(got, signal.ServeVerbs) {
			return fmt.Errorf("observer: denied %v after the revocation, want %v", got, signal.ServeVerbs)
		}
		return nil
	})
	_, after, _ := strings.Cut(logs.String(), "access restored")
	if !strings.Contains(after, `level=WARN msg="resnapshot requests are not answered`) {
		t.Errorf("no warning after the revocation:\n%s", logs)
	}
	if out := clientGo.String(); out != "" {
		t.Errorf("client-go logged:\n%s", out)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context's end")
	}
	done <- nil // for the deferred wait
	if got := obs.state(); got != nil {
		t.Errorf("observer after Run returned: denied %v, want cleared", got)
	}
}

// Serve itself (the leader's loop) gives a refusal back at once, whichever request was
// refused: the list and watch, handed to client-go's reflector, were retried and logged
// at ERROR every second or two until the context ended.
func TestServeRefusedByTheApiserverReturnsTheRefusalAtOnceAndClientGoLogsNothing(t *testing.T) {
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	ns := namespaceFor(t, kube, "signals-refused")
	const name = "kube-cdc-signals"
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
	}{
		{"no grant: the list or watch is refused", nil},
		{"list and watch but no get: the poll is refused", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := kube.RestrictedUser(context.Background(), "signals-refused", tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, func() error { // the authorizer has seen the rules
				a, err := signal.ReviewAccess(context.Background(), cs, ns, name)
				if err == nil && len(a.Allowed) != 2*len(tc.rules) {
					err = fmt.Errorf("allowed %v", a.Allowed)
				}
				return err
			})
			base, clientGo := clientGoLogs()
			ctx, cancel := context.WithTimeout(base, 30*time.Second)
			defer cancel()
			err = signal.ServeEvery(ctx, cs, ns, name, "leader-0", oneOutcome{}, log, 100*time.Millisecond)
			if ctx.Err() != nil || !apierrors.IsForbidden(err) {
				t.Errorf("Serve: %v (context: %v); want a Forbidden error before the context ended", err, ctx.Err())
			}
			if out := clientGo.String(); out != "" {
				t.Errorf("client-go logged:\n%s", out)
			}
		})
	}
}
