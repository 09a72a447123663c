package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/metrics"
	"github.com/kube-cdc/kube-cdc/internal/signal"
)

// Issue 33 (4): with RBAC for its resources alone (no grant on the signal ConfigMap),
// run used to log client-go's `Failed to watch … configmaps "…-signals" is forbidden` at
// ERROR every second or two, for as long as it ran. It now asks once, says once what is
// missing and what that disables (resnapshot requests), names it in status and check,
// asks again every kubernetes.accessCheckInterval, and answers once granted.

// signalsDenialWindow is how long the denial lasts, by the daemon's own account, before
// the log is read: client-go retried a refused list at 0.8 s, then 1.6, 3.2, … (with
// jitter up to twice that), so the old code logged at least three ERROR lines in it.
const signalsDenialWindow = 10 * time.Second

// signalsDenied is /resources' signalsDenied (null while requests are answered).
func signalsDenied(addr string) (*metrics.SignalsDenial, error) {
	code, body, err := opsGet("http://" + addr + "/resources")
	if err != nil || code != 200 {
		return nil, fmt.Errorf("/resources: %d %v", code, err)
	}
	var a metrics.ResourcesAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		return nil, fmt.Errorf("/resources: %v: %s", err, body)
	}
	return a.SignalsDenied, nil
}

// signalLines are the lines of d's log at WARN and at ERROR that name the ConfigMap cm
// (client-go's said `configmaps "<cm>" is forbidden`).
func signalLines(d *daemon, cm string) (warns, errs []string) {
	for _, line := range strings.Split(d.log(), "\n") {
		switch {
		case !strings.Contains(line, cm):
		case strings.Contains(line, "level=ERROR"):
			errs = append(errs, line)
		case strings.Contains(line, "level=WARN"):
			warns = append(warns, line)
		}
	}
	return warns, errs
}

func TestWithoutRBACOnTheSignalConfigMapRunSaysSoOnceNamesItInStatusAndCheckAndAnswersOnceGranted(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "data")
	sig := namespace(t, "sig") // the signal ConfigMap's, where the user has no grant yet
	const lease = "kube-cdc-acc"
	cmName := signal.ConfigMapName(lease)
	cm := sig + "/" + cmName
	user := "e2e-signals-" + ns[len(ns)-4:]
	_, kc, err := kube.RestrictedUser(ctx, user, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRoleBinding(t, ns, user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}})
	createConfigMaps(t, ns, 0, 1, nil)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	leaderElection := fmt.Sprintf("leaderElection:\n  namespace: %s\n  name: %s\n", sig, lease)
	cfg := writeConfig(t, accessConfigYAML(kc, dsn, ns, addr, "1s")+leaderElection)
	d := start(t, "run", "-c", cfg)
	isoLive(t, d, dsn, "configmaps", ns, "cm-0")

	// The denial, by the daemon's account, lasts the window: then the log holds one
	// warning and no ERROR line (the old code's were client-go's, one per retry).
	verbs := []string{"get", "list", "watch", "update"}
	var denial *metrics.SignalsDenial
	eventually(t, signalsDenialWindow+60*time.Second, func() error {
		isoRunning(t, d)
		var err error
		if denial, err = signalsDenied(addr); err != nil {
			return err
		}
		if denial == nil || time.Since(denial.Since) < signalsDenialWindow {
			return fmt.Errorf("/resources: signalsDenied %+v, want one that lasted %v", denial, signalsDenialWindow)
		}
		return nil
	})
	if denial.ConfigMap != cm || !slices.Equal(denial.Denied, verbs) || !strings.Contains(denial.Error, "resnapshot requests") {
		t.Errorf("/resources: signalsDenied %+v, want %s with %v denied, saying resnapshot requests are not answered", denial, cm, verbs)
	}
	warns, errs := signalLines(d, cmName)
	if len(errs) != 0 {
		t.Errorf("%d ERROR lines in %v of denial, want none: %q", len(errs), signalsDenialWindow, errs)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], `msg="resnapshot requests are not answered`) ||
		!strings.Contains(warns[0], "missing=get,list,watch,update") || !strings.Contains(warns[0], "grant get, list, watch, update on that ConfigMap") {
		t.Errorf("want one warning naming the grant missing and the resnapshot requests it disables, got %d: %q", len(warns), warns)
	}
	for _, verb := range verbs {
		labels := map[string]string{"configmap": cm, "verb": verb}
		if v, err := metric(addr, "kube_cdc_signals_access_denied", labels); err != nil || v != 1 {
			t.Errorf("kube_cdc_signals_access_denied%v = %v, %v; want 1", labels, v, err)
		}
	}
	code, out := runCLI(t, "status", "-c", cfg)
	if code != 0 || !regexp.MustCompile(`(?m)^SIGNALS DENIED: configmap `+regexp.QuoteMeta(cm)+`: get, list, watch, update denied for [0-9hms]+: get, list, watch, update configmaps/`+cmName+` not allowed in namespace `+sig+`: resnapshot requests \(kube-cdc resnapshot\) are not answered`).MatchString(out) {
		t.Errorf("status: exit %d, no SIGNALS DENIED line for %s:\n%s", code, cm, out)
	}
	if doc := statusAs(t, cfg, "json"); doc.Daemon.SignalsDenied == nil || !slices.Equal(doc.Daemon.SignalsDenied.Denied, verbs) ||
		doc.Daemon.SignalsDenied.ConfigMap != cm {
		t.Errorf("status -o json: daemon.signalsDenied %+v, want %s with %v", doc.Daemon.SignalsDenied, cm, verbs)
	}
	code, out = runCLI(t, "check", "-c", cfg)
	if code != 0 || !regexp.MustCompile(`(?m)^signals\s+warn\s+get, list, watch, update configmaps/`+cmName+` not allowed in namespace `+sig+`: resnapshot requests`).MatchString(out) {
		t.Errorf("check: exit %d (want 0: the data streams without it), no signals warn row:\n%s", code, out)
	}

	// Granted as the Helm chart grants it (by name): the daemon finds it at its next
	// check and answers a request.
	grantSignals(t, sig, user, cmName)
	eventually(t, 30*time.Second, func() error { // the interval is 1 s
		isoRunning(t, d)
		denial, err := signalsDenied(addr)
		if err == nil && denial != nil {
			err = fmt.Errorf("/resources: signalsDenied %+v after the grant", denial)
		}
		if _, body, merr := opsGet("http://" + addr + "/metrics"); err == nil && (merr != nil || strings.Contains(body, "kube_cdc_signals_access_denied{")) {
			err = fmt.Errorf("kube_cdc_signals_access_denied still served after the grant (%v)", merr)
		}
		return err
	})
	restored := 0
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, `msg="access restored: resnapshot requests are answered again"`) && strings.Contains(line, "configmap="+cm) {
			restored++
		}
	}
	if restored != 1 {
		t.Errorf("%d info lines saying resnapshot requests are answered again, want 1", restored)
	}
	admin := writeConfig(t, accessConfigYAML(kube.Kubeconfig, dsn, ns, "", "1s")+leaderElection)
	if res := resnapshotJSON(t, admin); res.State != signal.StateDone || outcomeOf(t, res, "warehouse").Listed != 1 {
		t.Errorf("resnapshot after the grant: %+v, want done with cm-0 listed", res)
	}
	if code, out := runCLI(t, "check", "-c", cfg); code != 0 || !regexp.MustCompile(`(?m)^signals\s+ok\s+get, list, watch, update allowed on configmaps/`+cmName+` in namespace `+sig).MatchString(out) {
		t.Errorf("check after the grant: exit %d, no signals ok row:\n%s", code, out)
	}
	if code, out := runCLI(t, "status", "-c", cfg); code != 0 || strings.Contains(out, "SIGNALS DENIED") {
		t.Errorf("status after the grant: exit %d, still a SIGNALS DENIED line:\n%s", code, out)
	}
	if _, errs := signalLines(d, cmName); len(errs) != 0 {
		t.Errorf("ERROR lines in the log: %q", errs)
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// grantSignals lets user read and write ConfigMap name in ns, by name (the Helm chart's
// Role <release>-signals), and waits until the authorizer has seen it.
func grantSignals(t *testing.T, ns, user, name string) {
	t.Helper()
	ctx := context.Background()
	rbac := kube.Clientset().RbacV1()
	role := "e2e-signals-" + user
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name},
		Verbs: []string{"get", "list", "watch", "update"}}
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: "kube-cdc-testenv"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		for _, verb := range rule.Verbs {
			r, err := kube.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:kube-cdc-testenv:" + user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps", Name: name},
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !r.Status.Allowed {
				return fmt.Errorf("%s configmaps/%s in %s not yet allowed", verb, name, ns)
			}
		}
		return nil
	})
}
