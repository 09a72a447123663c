package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// auditPolicy audits the writes of configmaps, secrets and pods with their bodies
// (RequestResponse: the response's resourceVersion makes the join exact), podtemplates'
// at Metadata (no bodies: nearest), and nothing of the admin (kube-cdc itself, and the
// tests' own setup) or of anything else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [admin]
- level: Metadata
  resources: [{group: "", resources: [podtemplates]}]
  verbs: [create, update, patch, delete, deletecollection]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps, secrets, pods, pods/status]}]
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// auditedPlane is a private control plane whose apiserver sends its audit events
// (auditPolicy) to a kube-cdc receiver at addr, authenticated with the client certificate
// of certs; the daemon's config gets the receiver's keys from auditConfig.
func auditedPlane(t *testing.T, initialBackoff time.Duration) (k *testenv.Kube, addr string, certs *testenv.AuditTLS) {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	if certs, err = testenv.NewAuditTLS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	k = testenv.NewKube(t, testenv.KubeOptions{Audit: &testenv.AuditOptions{
		Policy: auditPolicy,
		Webhook: &testenv.AuditWebhook{URL: "https://" + addr + "/audit", CAPEM: certs.CAPEM,
			ClientCertPEM: certs.ClientCertPEM, ClientKeyPEM: certs.ClientKeyPEM, InitialBackoff: initialBackoff},
	}})
	planes.Store(t.Name(), k)
	t.Cleanup(func() { planes.Delete(t.Name()) })
	return k, addr, certs
}

const auditToken = "e2e-audit-token-0123456789"

func auditConfig(t *testing.T, addr string, certs *testenv.AuditTLS) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(auditToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`audit:
  webhook:
    listen: %q
    tlsCertFile: %q
    tlsKeyFile: %q
    clientCAFile: %q
    tokenFile: %q
`, addr, certs.CertFile, certs.KeyFile, certs.CAFile, tokenFile)
}

// actorRow is a changes row of the test's namespace with its actor ("" when none);
// actorRows orders them by resource, then as written.
type actorRow struct {
	id                   int64
	resource, name, op   string
	rv                   int64
	uid                  string
	user, impersonator   string
	match, auditID       string
	distance             time.Duration
	hasDeletionTimestamp bool
}

func (r actorRow) String() string {
	s := fmt.Sprintf("#%d %s/%s %s rv %d by %q", r.id, r.resource, r.name, r.op, r.rv, r.user)
	if r.impersonator != "" {
		s += " (impersonated by " + r.impersonator + ")"
	}
	return s + " " + r.match
}

func actorRows(t *testing.T, conn *pgx.Conn, ns string) []actorRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT c.id, c.resource, c.name, c.op, c.resource_version, c.uid, coalesce(a.username, ''), coalesce(a.impersonator, ''),
		       coalesce(a.match, ''), coalesce(a.audit_id, ''), coalesce(extract(epoch FROM a.distance), 0)::float8,
		       coalesce(c.object -> 'metadata' ? 'deletionTimestamp', false)
		  FROM kube_cdc.changes c LEFT JOIN kube_cdc.change_actors a ON a.change_id = c.id
		 WHERE c.namespace = $1 ORDER BY c.resource, c.id`, ns)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (actorRow, error) {
		var r actorRow
		var secs float64
		err := row.Scan(&r.id, &r.resource, &r.name, &r.op, &r.rv, &r.uid, &r.user, &r.impersonator, &r.match, &r.auditID,
			&secs, &r.hasDeletionTimestamp)
		r.distance = time.Duration(secs * float64(time.Second))
		return r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// userClient is a clientset for one of testenv.TokenUsers that calls itself kubectl.
func userClient(t *testing.T, k *testenv.Kube, user string, impersonate *rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cfg, err := k.TokenUser(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl/v1.36.5 (linux/amd64) kubernetes/e2e"
	if impersonate != nil {
		cfg.Impersonate = *impersonate
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// want is what a test expects of one changes row.
type want struct {
	resource, name, op, user, impersonator, match string
}

// waitActors waits until the namespace's changes rows are exactly want, in order
// (resource, name, op, actor), and returns them.
func waitActors(t *testing.T, conn *pgx.Conn, ns string, wants []want) []actorRow {
	t.Helper()
	var got []actorRow
	eventually(t, 60*time.Second, func() error {
		got = actorRows(t, conn, ns)
		var problems []string
		if len(got) != len(wants) {
			problems = append(problems, fmt.Sprintf("%d rows, want %d", len(got), len(wants)))
		}
		for i := range min(len(got), len(wants)) {
			g, w := got[i], wants[i]
			if g.resource != w.resource || g.name != w.name || g.op != w.op || g.user != w.user ||
				g.impersonator != w.impersonator || g.match != w.match {
				problems = append(problems, fmt.Sprintf("row %d is %s, want %s/%s %s by %q (impersonated by %q) %s",
					i+1, g, w.resource, w.name, w.op, w.user, w.impersonator, w.match))
			}
		}
		if len(problems) > 0 {
			var all []string
			for _, g := range got {
				all = append(all, g.String())
			}
			return fmt.Errorf("%s\nrows:\n  %s", strings.Join(problems, "\n"), strings.Join(all, "\n  "))
		}
		return nil
	})
	return got
}

func TestAuditActorsNameWhoMadeEachChange(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	k, addr, certs := auditedPlane(t, 0)
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "who")
	resources := fmt.Sprintf("  - {name: configmaps, namespaces: [%[1]s]}\n  - {name: secrets, namespaces: [%[1]s]}\n"+
		"  - {name: pods, namespaces: [%[1]s]}\n  - {name: podtemplates, namespaces: [%[1]s]}", ns)
	// A stdout sink too, waiting up to 10 s per batch for actors to write them in its lines.
	cfg := writeConfig(t, strings.Replace(pgConfigYAML(dsn, resources, auditConfig(t, addr, certs)+"  wait: 10s\n"),
		"sinks:\n", "sinks:\n  - {name: lines, type: stdout}\n", 1))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 4)
	devA := userClient(t, k, testenv.TokenUsers[0], nil)
	devB := userClient(t, k, testenv.TokenUsers[1], nil)
	devC := userClient(t, k, testenv.TokenUsers[2], nil)
	// dev-a acting as dev-c (who is allowed through the group, impersonated too).
	asC := userClient(t, k, testenv.TokenUsers[0], &rest.ImpersonationConfig{
		UserName: testenv.TokenUsers[2], Groups: []string{testenv.TokenUsersGroup, "system:authenticated"}})
	saCfg, _, err := k.RestrictedUser(ctx, "e2e-audit-writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "get"}}})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	const saUser = "system:serviceaccount:kube-cdc-testenv:e2e-audit-writer"
	a, b, c := testenv.TokenUsers[0], testenv.TokenUsers[1], testenv.TokenUsers[2]

	// Writes at RequestResponse: create, update, a merge patch, an apply patch, the same
	// object updated by two users within the same second, a ServiceAccount, an
	// impersonation, a dry-run update and a patch that changes nothing, deletes.
	cms := func(cs kubernetes.Interface) interface {
		Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
		Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.ConfigMap, error)
		Delete(context.Context, string, metav1.DeleteOptions) error
	} {
		return cs.CoreV1().ConfigMaps(ns)
	}
	must := func(obj *corev1.ConfigMap, err error) *corev1.ConfigMap {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	cm := must(cms(devA).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}))
	cm.Data["v"] = "2"
	cm = must(cms(devB).Update(ctx, cm, metav1.UpdateOptions{}))
	cm = must(cms(devC).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"3"}}`), metav1.PatchOptions{}))
	force := true
	cm = must(cms(devA).Patch(ctx, "shared", types.ApplyPatchType,
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shared"},"data":{"v":"4"}}`),
		metav1.PatchOptions{FieldManager: "kubectl", Force: &force}))
	// Two users, one right after the other (well within a second).
	cm.Data["v"] = "5"
	cm = must(cms(devB).Update(ctx, cm, metav1.UpdateOptions{}))
	cm.Data["v"] = "6"
	cm = must(cms(devC).Update(ctx, cm, metav1.UpdateOptions{}))
	cm = must(cms(sa).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"7"}}`), metav1.PatchOptions{}))
	cm = must(cms(asC).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"8"}}`), metav1.PatchOptions{}))
	// A dry run and a patch to what is there change nothing: nothing attaches to v8's row.
	dry := cm.DeepCopy()
	dry.Data["v"] = "dry"
	must(cms(devB).Update(ctx, dry, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}))
	noop := must(cms(devB).Patch(ctx, "shared", types.MergePatchType, []byte(`{"data":{"v":"8"}}`), metav1.PatchOptions{}))
	if noop.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the no-op patch answered RV %s, want the unchanged %s", noop.ResourceVersion, cm.ResourceVersion)
	}
	// A refused write (a conflict) changes nothing either.
	stale := cm.DeepCopy()
	stale.ResourceVersion = "1"
	if _, err := cms(devC).Update(ctx, stale, metav1.UpdateOptions{}); err == nil {
		t.Fatal("an update with a stale RV succeeded")
	}
	if err := cms(devB).Delete(ctx, "shared", metav1.DeleteOptions{}); err != nil { // answered with a Status
		t.Fatal(err)
	}
	must(cms(sa).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-sa"}}, metav1.CreateOptions{}))

	// A Secret at RequestResponse: its value travels in the audit event's bodies.
	const secretValue = "hunter2-e2e-audit-secret-value"
	sec, err := devA.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"password": secretValue + "-v1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{"password": []byte(secretValue)}
	if _, err := devB.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A Pod deleted: an update (deletionTimestamp) may precede the delete; the DELETE's
	// response carries the delete's RV.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := devA.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := devC.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Metadata level: no response RV, so nearest; created, updated, deleted and created
	// again (a new uid) by different users.
	tmpl := func(v string) *corev1.PodTemplate {
		return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"v": v}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}
	}
	pt, err := devA.CoreV1().PodTemplates(ns).Create(ctx, tmpl("1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pt.Labels["v"] = "2"
	if _, err := devB.CoreV1().PodTemplates(ns).Update(ctx, pt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := devC.CoreV1().PodTemplates(ns).Delete(ctx, "t", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := devB.CoreV1().PodTemplates(ns).Create(ctx, tmpl("3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The admin's writes are not audited: "u"'s first uid has no create event, and the
	// create event of its second uid must not stand in for it.
	u := tmpl("1")
	u.Name = "u"
	if _, err := k.Clientset().CoreV1().PodTemplates(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := devC.CoreV1().PodTemplates(ns).Delete(ctx, "u", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := devB.CoreV1().PodTemplates(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ex, near := "exact", "nearest"
	wants := []want{
		{"configmaps", "shared", "create", a, "", ex},
		{"configmaps", "shared", "update", b, "", ex},
		{"configmaps", "shared", "update", c, "", ex},
		{"configmaps", "shared", "update", a, "", ex}, // the apply patch
		{"configmaps", "shared", "update", b, "", ex}, // two users within a second
		{"configmaps", "shared", "update", c, "", ex},
		{"configmaps", "shared", "update", saUser, "", ex},
		{"configmaps", "shared", "update", c, a, ex}, // dev-a impersonating dev-c
		{"configmaps", "shared", "delete", b, "", ex},
		{"configmaps", "by-sa", "create", saUser, "", ex},
		{"pods", "p", "create", a, "", ex},
	}
	// The pod's delete: whether an update precedes it depends on the apiserver (a pod
	// never scheduled is deleted at once); read it from the rows.
	var podRows []actorRow
	eventually(t, 60*time.Second, func() error {
		podRows = nil
		for _, r := range actorRows(t, conn, ns) {
			if r.resource == "pods" {
				podRows = append(podRows, r)
			}
		}
		if len(podRows) == 0 || podRows[len(podRows)-1].op != "delete" {
			return fmt.Errorf("the pod's rows: %v", podRows)
		}
		return nil
	})
	for _, r := range podRows[1 : len(podRows)-1] {
		if !r.hasDeletionTimestamp {
			t.Fatalf("the pod has an update row besides the delete's: %v", podRows)
		}
		// Made by the DELETE, whose response RV is the delete's: nearest.
		wants = append(wants, want{"pods", "p", "update", c, "", near})
	}
	wants = append(wants,
		want{"pods", "p", "delete", c, "", ex},
		want{"podtemplates", "t", "create", a, "", near},
		want{"podtemplates", "t", "update", b, "", near},
		want{"podtemplates", "t", "delete", c, "", near},
		want{"podtemplates", "t", "create", b, "", near},
		want{"podtemplates", "u", "create", "", "", ""},
		want{"podtemplates", "u", "delete", c, "", near},
		want{"podtemplates", "u", "create", b, "", near},
		want{"secrets", "creds", "create", a, "", ex},
		want{"secrets", "creds", "update", b, "", ex},
	)
	rows := waitActors(t, conn, ns, wants)
	for _, r := range rows {
		if r.match == near && r.distance > 10*time.Second {
			t.Errorf("%s: nearest by %v", r, r.distance)
		}
	}

	t.Run("the dry run is not stored and the no-op patch stays unmatched", func(t *testing.T) {
		var stored, unmatched int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE verb = 'update' AND username = $2),
			count(*) FILTER (WHERE verb = 'patch' AND username = $2 AND NOT EXISTS (SELECT 1 FROM kube_cdc.change_actors a WHERE a.audit_id = e.audit_id))
			FROM kube_cdc.audit_events e WHERE namespace = $1 AND resource = 'configmaps'`, ns, b).Scan(&stored, &unmatched); err != nil {
			t.Fatal(err)
		}
		// dev-b's updates: v2 and v5 (the dry run is not among them); the no-op patch is
		// stored but explains no change.
		if stored != 2 || unmatched != 1 {
			t.Errorf("dev-b's stored updates %d (want 2: no dry run), unmatched patches %d (want 1: the no-op)", stored, unmatched)
		}
	})

	t.Run("stdout lines carry who", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			for _, line := range strings.Split(d.out.String(), "\n") {
				if strings.Contains(line, `"name":"by-sa"`) {
					if !strings.Contains(line, `"user":"`+saUser+`"`) || !strings.Contains(line, `"auditID":"`) {
						return fmt.Errorf("by-sa's line lacks its user: %s", line)
					}
					return nil
				}
			}
			return fmt.Errorf("no line of by-sa yet")
		})
		for _, line := range strings.Split(d.out.String(), "\n") {
			if strings.Contains(line, `"name":"shared"`) && strings.Contains(line, `"op":"u"`) && strings.Contains(line, `"impersonator":"`+a+`"`) &&
				!strings.Contains(line, `"user":"`+c+`"`) {
				t.Errorf("the impersonated update's line names another user: %s", line)
			}
		}
	})

	t.Run("kube-cdc history says who", func(t *testing.T) {
		code, out := runCLI(t, "history", "configmaps", "shared", "-n", ns, "-c", cfg)
		if code != 0 {
			t.Fatalf("history: exit %d\n%s", code, out)
		}
		for _, w := range []string{"by " + a + " (kubectl/v1.36.5)", "by " + c + " (kubectl/v1.36.5, impersonated by " + a + ")", "by " + saUser} {
			if !strings.Contains(out, w) {
				t.Errorf("history lacks %q:\n%s", w, out)
			}
		}
		_, js := runCLI(t, "history", "configmaps", "shared", "-n", ns, "-c", cfg, "-o", "json")
		if !strings.Contains(js, `"username": "`+b+`"`) || !strings.Contains(js, `"match": "exact"`) {
			t.Errorf("history -o json lacks the actors:\n%s", js)
		}
	})

	t.Run("check says audit events arrive and how they joined", func(t *testing.T) {
		code, out := runCLI(t, "check", "-c", cfg)
		if code != 0 || !regexp.MustCompile(`audit receiver\s+ok\s+\d+ audit events in the last 5m0s; of \d+ changes \d+ joined exactly, \d+ nearest, 1 unmatched`).MatchString(out) {
			t.Errorf("check: exit %d\n%s", code, out)
		}
		code, out = runCLI(t, "status", "-c", cfg)
		if code != 0 || !regexp.MustCompile(`audit \(sink warehouse, last 5m0s\): \d+ events; of \d+ changes \d+ joined exactly, \d+ nearest, 1 without an actor`).MatchString(out) {
			t.Errorf("status: exit %d\n%s", code, out)
		}
		code, out = runCLI(t, "status", "-c", cfg, "-o", "json")
		if code != 0 || !strings.Contains(out, `"unmatchedChanges": 1`) {
			t.Errorf("status -o json: exit %d\n%s", code, out)
		}
		broken := strings.Replace(readFile(t, cfg), certs.CertFile, certs.CAFile+".missing", 1)
		code, out = runCLI(t, "check", "-c", writeConfig(t, broken))
		if code == 0 || !strings.Contains(out, "tlsCertFile") {
			t.Errorf("check with a missing certificate: exit %d\n%s", code, out)
		}
	})

	t.Run("no value of the Secret in the database or the logs", func(t *testing.T) {
		needles := secretNeedles(secretValue, secretValue+"-v1")
		rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'kube_cdc'`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			for _, n := range needles {
				var hits int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.`+pgx.Identifier{table}.Sanitize()+` t WHERE t::text LIKE '%' || $1 || '%'`, n).Scan(&hits); err != nil {
					t.Fatal(err)
				}
				if hits > 0 {
					t.Errorf("table %s holds %q in %d rows", table, n, hits)
				}
			}
		}
		log := d.log()
		for _, n := range needles {
			if strings.Contains(log, n) || strings.Contains(d.out.String(), n) {
				t.Errorf("kube-cdc's output holds %q", n)
			}
		}
	})

	t.Run("both arrival orders end joined", func(t *testing.T) {
		// The admin's writes are not audited: the tests send their events themselves.
		admin := k.Clientset().CoreV1().ConfigMaps(ns)
		// After: the change is in the database before its event arrives.
		late, err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "event-after"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1 AND name = 'event-after'`, ns); n != 1 {
				return fmt.Errorf("%d rows", n)
			}
			return nil
		})
		if code := postAudit(t, addr, certs, auditToken, auditEventList(ns, "late-bird", "event-after", "late-event",
			`,"responseObject":{"kind":"ConfigMap","metadata":{"uid":"`+string(late.UID)+`","resourceVersion":"`+late.ResourceVersion+`"}}`)); code != 200 {
			t.Fatalf("the receiver answered %d", code)
		}
		// Before: the event arrives, then the change (Metadata level: nearest).
		if code := postAudit(t, addr, certs, auditToken, auditEventList(ns, "early-bird", "event-before", "early-event", "")); code != 200 {
			t.Fatalf("the receiver answered %d", code)
		}
		if _, err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "event-before"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			got := map[string]string{}
			for _, r := range actorRows(t, conn, ns) {
				if strings.HasPrefix(r.name, "event-") {
					got[r.name] = r.user + " " + r.match
				}
			}
			if got["event-after"] != "late-bird exact" || got["event-before"] != "early-bird nearest" {
				return fmt.Errorf("actors %v", got)
			}
			return nil
		})
	})

	t.Run("bad input is refused or counted and the receiver goes on", func(t *testing.T) {
		if code := postAudit(t, addr, nil, "", auditEventList(ns, "intruder", "x", "intruder-event", "")); code != 401 {
			t.Errorf("an unauthenticated POST: %d, want 401", code)
		}
		if code := postAudit(t, addr, nil, "wrong", auditEventList(ns, "intruder", "x", "intruder-event", "")); code != 401 {
			t.Errorf("a wrong token: %d, want 401", code)
		}
		if code := postAudit(t, addr, certs, "", `{"kind":"EventList","items":[{"auditID": 5`); code != 400 {
			t.Errorf("a malformed EventList: %d, want 400", code)
		}
		unknown := strings.Replace(auditEventList(ns, "dev-x", "w", "unknown-resource-event", ""), `"resource":"configmaps"`,
			`"apiGroup":"example.com","resource":"gizmos"`, 1)
		if code := postAudit(t, addr, certs, "", unknown); code != 200 {
			t.Errorf("an event of an unknown resource: %d, want 200 (stored, matching nothing)", code)
		}
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.audit_events WHERE audit_id = 'intruder-event'`); n != 0 {
			t.Errorf("the unauthenticated event was stored")
		}
		// Still serving: a write after all that is joined.
		must(cms(devA).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-bad-input"}}, metav1.CreateOptions{}))
		eventually(t, 30*time.Second, func() error {
			for _, r := range actorRows(t, conn, ns) {
				if r.name == "after-bad-input" && r.user == a && r.match == ex {
					return nil
				}
			}
			return fmt.Errorf("after-bad-input not joined")
		})
		select {
		case <-d.done:
			t.Fatalf("kube-cdc exited: %v", d.err)
		default:
		}
	})
}

// auditEventList is an EventList of one completed create of configmap name in ns by user,
// with extra fields (a responseObject) appended to the event.
func auditEventList(ns, user, name, auditID, extra string) string {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") // a MicroTime
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"level":"Metadata","auditID":"` + auditID +
		`","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/` + ns + `/configmaps","verb":"create","user":{"username":"` + user +
		`"},"objectRef":{"resource":"configmaps","namespace":"` + ns + `","name":"` + name + `","apiVersion":"v1"},` +
		`"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"` + now + `","stageTimestamp":"` + now + `"` + extra + `}]}`
}

// postAudit POSTs body to the receiver at addr, with the client certificate of certs (nil:
// none) and token ("" none), and returns the status code.
func postAudit(t *testing.T, addr string, certs *testenv.AuditTLS, token, body string) int {
	t.Helper()
	pool := x509.NewCertPool()
	cfg := &tls.Config{RootCAs: pool}
	if certs != nil {
		pool.AppendCertsFromPEM(certs.CAPEM)
		c, err := tls.X509KeyPair(certs.ClientCertPEM, certs.ClientKeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	} else {
		cfg.InsecureSkipVerify = true // the caller is what is tested, not the server
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/audit", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAStandbyReplicaReceivesAndStoresAuditEvents(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := namespace(t, "standby")
	// Someone else holds the lease for an hour: this replica stays a standby.
	now := metav1.NowMicro()
	holder, secs := "the-leader", int32(3600)
	if _, err := kube.Clientset().CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-cdc-e2e"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - {name: configmaps, namespaces: ["+ns+"]}", auditConfig(t, addr, certs)+fmt.Sprintf(`leaderElection:
  enabled: true
  namespace: %s
  name: kube-cdc-e2e
  identity: the-standby
`, ns))
	d := start(t, "run", "-c", cfg)
	body := auditEventList(ns, "dev-a@example.com", "x", "standby-event", "")
	eventually(t, 60*time.Second, func() error {
		if code := postAuditOnce(addr, certs, body); code != 200 {
			return fmt.Errorf("the standby's receiver answered %d", code)
		}
		return nil
	})
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.audit_events WHERE audit_id = 'standby-event'`); n != 1 {
		t.Errorf("%d events stored by the standby, want 1", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints`); n != 0 {
		t.Errorf("the standby streamed: %d checkpoints", n)
	}
	if strings.Contains(d.log(), "all resources synced") {
		t.Errorf("the standby streamed:\n%s", d.log())
	}
}

// postAuditOnce is postAudit with the client certificate, returning 0 when the receiver
// cannot be reached (yet).
func postAuditOnce(addr string, certs *testenv.AuditTLS, body string) int {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	c, err := tls.X509KeyPair(certs.ClientCertPEM, certs.ClientKeyPEM)
	if err != nil {
		return 0
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{c}}},
		Timeout: 10 * time.Second}
	resp, err := client.Post("https://"+addr+"/audit", "application/json", strings.NewReader(body))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The receiver is down for receiverOutage while writes go on; the apiserver re-sends each
// failed batch for at least auditRetryFor after its first attempt, which leaves the
// restarted kube-cdc some 20 s to listen again.
const (
	receiverOutage = 30 * time.Second
	auditRetryFor  = 50 * time.Second
)

func TestAuditEventsSentWhileTheReceiverWasDownAreJoinedOnceItIsBack(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The apiserver makes 5 attempts at a batch, waiting b, 1.5b, 2.25b and 3.375b (+0-20%)
	// between them (testenv.AuditWebhookRetryCover): with b ≈ 6.2 s, a batch first tried
	// when the receiver went down is tried for the last time 50 to 60 s later.
	k, addr, certs := auditedPlane(t, testenv.AuditWebhookInitialBackoffFor(auditRetryFor))
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "down")
	cfg := pgConfig(t, dsn, "  - {name: configmaps, namespaces: ["+ns+"]}", auditConfig(t, addr, certs))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 1)
	devB := userClient(t, k, testenv.TokenUsers[1], nil).CoreV1().ConfigMaps(ns)
	if _, err := devB.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	joined := func(n int) func() error {
		return func() error {
			rows := actorRows(t, conn, ns)
			ok := 0
			var unjoined []actorRow
			for _, r := range rows {
				if r.user == testenv.TokenUsers[1] && r.match == "exact" {
					ok++
				} else {
					unjoined = append(unjoined, r)
				}
			}
			if len(rows) != n || ok != n {
				return fmt.Errorf("%d of %d rows joined exactly to dev-b, want %d; not joined: %v", ok, len(rows), n, unjoined)
			}
			return nil
		}
	}
	eventually(t, 60*time.Second, joined(1))

	// Killed: batches under way are not acknowledged. Writes go on, one create and one
	// update a second, for the whole outage (the scenario's pace and length, not waits
	// for a condition).
	_ = d.cmd.Process.Kill()
	<-d.done
	down := time.Now()
	writes := 1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; time.Since(down) < receiverOutage; i++ {
		cm, err := devB.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("while-down-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": "2"}
		if _, err := devB.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		writes += 2
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	t.Logf("%d writes while the receiver was down for %v", writes-1, time.Since(down).Round(time.Second))
	start(t, "run", "-c", cfg)
	// Every write's change joined exactly, and each event stored once however often the
	// apiserver re-sent it.
	eventually(t, 2*time.Minute, joined(writes))
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.audit_events WHERE namespace = '`+ns+`'`); n != writes {
		t.Errorf("%d audit events stored, want one per write, %d", n, writes)
	}
}

// waitAuditSynced waits for the initial (empty) syncs of n resources: what follows is watched.
func waitAuditSynced(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	eventually(t, 90*time.Second, func() error {
		var got int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource_version > 0`).Scan(&got)
		if err == nil && got != n {
			err = fmt.Errorf("%d checkpoints, want %d", got, n)
		}
		return err
	})
}

func TestAuditEventsAreReadFromTheApiserversLogFileAcrossARestart(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "audit.log")
	k := testenv.NewKube(t, testenv.KubeOptions{Audit: &testenv.AuditOptions{Policy: auditPolicy, LogPath: logPath}})
	planes.Store(t.Name(), k)
	t.Cleanup(func() { planes.Delete(t.Name()) })
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "logfile")
	cfg := pgConfig(t, dsn, "  - {name: configmaps, namespaces: ["+ns+"]}",
		fmt.Sprintf("audit:\n  logFile: {path: %q, pollInterval: 100ms}\nleaderElection: {identity: e2e-node}\n", logPath))
	d := start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 1)
	a, b := testenv.TokenUsers[0], testenv.TokenUsers[1]
	devA := userClient(t, k, a, nil).CoreV1().ConfigMaps(ns)
	devB := userClient(t, k, b, nil).CoreV1().ConfigMaps(ns)
	cm, err := devA.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if cm, err = devB.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActors(t, conn, ns, []want{{"configmaps", "c", "create", a, "", "exact"}, {"configmaps", "c", "update", b, "", "exact"}})
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Written while kube-cdc is stopped: read from the stored position when it is back.
	cm.Data["v"] = "3"
	if _, err := devA.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start(t, "run", "-c", cfg)
	waitActors(t, conn, ns, []want{{"configmaps", "c", "create", a, "", "exact"}, {"configmaps", "c", "update", b, "", "exact"},
		{"configmaps", "c", "update", a, "", "exact"}})
	eventually(t, 30*time.Second, func() error {
		st, err := os.Stat(logPath)
		if err != nil {
			return err
		}
		var off int64
		if err := conn.QueryRow(ctx, `SELECT "offset" FROM kube_cdc.audit_log_positions WHERE reader = 'e2e-node' AND path = $1`, logPath).Scan(&off); err != nil {
			return err
		}
		if off != st.Size() {
			return fmt.Errorf("position %d, file size %d", off, st.Size())
		}
		return nil
	})
}

func TestKafkaRecordsCarryTheirActorAndTheActorsTopicHasEveryEvent(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k, addr, certs := auditedPlane(t, 0)
	broker := testenv.NewKafka(t)
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "kafka")
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - {name: configmaps, namespaces: [%s]}
sinks:
  - name: warehouse
    type: postgres
    postgres: {dsn: %q}
  - name: stream
    type: kafka
    kafka: {brokers: [%q], createTopics: true, partitions: 1}
    checkpoint: {type: file, path: %q}
metrics:
  address: ""
%s  wait: 10s
`, k.Kubeconfig, ns, dsn, broker.Addr(), filepath.Join(t.TempDir(), "state.db"), auditConfig(t, addr, certs)))
	start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 1) // the PostgreSQL sink's; the Kafka sink's are in its file
	devA := userClient(t, k, testenv.TokenUsers[0], nil).CoreV1().ConfigMaps(ns)
	cm, err := devA.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const secretValue = "kafka-e2e-audit-secret-value"
	if _, err := userClient(t, k, testenv.TokenUsers[1], nil).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := ns + "/x"
	eventually(t, 60*time.Second, func() error {
		msgs, err := broker.ReadAll(ctx, "kube.e2e.actors")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			var a struct {
				User string `json:"user"`
				RV   string `json:"resourceVersion"`
				Verb string `json:"verb"`
			}
			if string(m.Key) == key && json.Unmarshal(m.Value, &a) == nil && a.User == testenv.TokenUsers[0] && a.RV == cm.ResourceVersion && a.Verb == "create" {
				return nil
			}
		}
		return fmt.Errorf("no actor record of %s at RV %s among %d", key, cm.ResourceVersion, len(msgs))
	})
	eventually(t, 60*time.Second, func() error {
		msgs, err := broker.ReadAll(ctx, "kube.e2e.core.configmaps")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			var env struct {
				Source struct {
					Name, ResourceVersion, User string
				} `json:"source"`
			}
			if m.Value != nil && json.Unmarshal(m.Value, &env) == nil && env.Source.Name == "x" && env.Source.ResourceVersion == cm.ResourceVersion {
				if env.Source.User != testenv.TokenUsers[0] {
					return fmt.Errorf("x's record names user %q: %s", env.Source.User, m.Value)
				}
				return nil
			}
		}
		return fmt.Errorf("no record of x yet")
	})
	// The Secret's write is in the actors topic (its event), its value nowhere.
	eventually(t, 60*time.Second, func() error {
		msgs, err := broker.ReadAll(ctx, "kube.e2e.actors")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if string(m.Key) == ns+"/creds" {
				return nil
			}
		}
		return fmt.Errorf("no actor record of the Secret yet")
	})
	for _, topic := range []string{"kube.e2e.actors", "kube.e2e.core.secrets", "kube.e2e.core.configmaps"} {
		msgs, err := broker.ReadAll(ctx, topic)
		if err != nil {
			continue // a topic never written
		}
		for _, m := range msgs {
			for _, n := range secretNeedles(secretValue) {
				if strings.Contains(string(m.Value), n) || strings.Contains(string(m.Key), n) {
					t.Errorf("topic %s holds %q", topic, n)
				}
			}
		}
	}
}

// secretNeedles are what must never be stored or logged of a Secret's values: each value,
// its base64 and its unkeyed SHA-256 digests (hex and base64).
func secretNeedles(values ...string) []string {
	var out []string
	for _, v := range values {
		sum := sha256.Sum256([]byte(v))
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString(sum[:]),
			base64.StdEncoding.EncodeToString(sum[:]))
	}
	return out
}

// Cluster mode: the Deployment controller's own changes to the ReplicaSets it manages are
// joined to it (its ServiceAccount), the Deployment's to the user who made it.
func TestAControllersChangesAreJoinedToTheController(t *testing.T) {
	t.Parallel() // on a control plane of its own; see main_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.NewCluster(t, testenv.ClusterOptions{ServiceAccountCredentials: true, Kube: testenv.KubeOptions{Audit: &testenv.AuditOptions{
		Policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: None\n  users: [admin]\n" +
			"- level: RequestResponse\n  resources: [{group: apps, resources: [deployments, replicasets, replicasets/status]}]\n" +
			"  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n",
		Webhook: &testenv.AuditWebhook{URL: "https://" + addr + "/audit", CAPEM: certs.CAPEM,
			ClientCertPEM: certs.ClientCertPEM, ClientKeyPEM: certs.ClientKeyPEM},
	}}})
	planes.Store(t.Name(), c.Kube)
	t.Cleanup(func() { planes.Delete(t.Name()) })
	dsn := pg.NewDatabase(t)
	ns := namespace(t, "ctl")
	cfg := pgConfig(t, dsn, "  - {name: deployments.apps, namespaces: ["+ns+"]}\n  - {name: replicasets.apps, namespaces: ["+ns+"]}",
		auditConfig(t, addr, certs))
	start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	waitAuditSynced(t, conn, 2)
	devA := userClient(t, c.Kube, testenv.TokenUsers[0], nil)
	d := testenv.Deployment(ns, "web", 1, "web:1")
	if _, err := devA.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const controller = "system:serviceaccount:kube-system:deployment-controller"
	eventually(t, 120*time.Second, func() error {
		rows := actorRows(t, conn, ns)
		var rsCreate, depCreate bool
		for _, r := range rows {
			if r.resource == "replicasets" && r.op == "create" {
				if r.user != controller || r.match != "exact" {
					return fmt.Errorf("the ReplicaSet's create: %s", r)
				}
				rsCreate = true
			}
			if r.resource == "deployments" && r.op == "create" {
				if r.user != testenv.TokenUsers[0] || r.match != "exact" {
					return fmt.Errorf("the Deployment's create: %s", r)
				}
				depCreate = true
			}
			if r.resource == "deployments" && r.op == "update" && r.user != "" && r.user != controller {
				return fmt.Errorf("a Deployment status update by %s", r)
			}
		}
		if !rsCreate || !depCreate {
			return fmt.Errorf("rows %v", rows)
		}
		return nil
	})
}
