package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// histSchema is not the default schema, so the SQL function is also shown to work from a
// session whose search_path does not name it.
const histSchema = "hist_audit"

// histRow is one changes row of the Deployment, as the test reads it from the database.
type histRow struct {
	id         int64
	op, rv, by string
	object     string
}

// histEntry is one element of `kube-cdc history -o json`.
type histEntry struct {
	ID              int64           `json:"id"`
	ObservedAt      time.Time       `json:"observedAt"`
	Op              string          `json:"op"`
	ResourceVersion string          `json:"resourceVersion"`
	UID             string          `json:"uid"`
	ChangedBy       string          `json:"changedBy"`
	Inferred        bool            `json:"inferred"`
	Reason          string          `json:"reason"`
	Snapshot        bool            `json:"snapshot"`
	Patch           json.RawMessage `json:"patch"`
}

type histOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

func TestHistoryShowsEachVersionOfADeploymentWithWhoChangedItAndWhatChanged(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "h")
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: deployments.apps\n    namespaces: ["+ns+"]", ""),
		"    postgres:\n", "    postgres:\n      schema: "+histSchema+"\n", 1))
	start(t, "run", "-c", cfg)
	conn := connect(t, dsn)
	eventually(t, 60*time.Second, func() error { // the initial (empty) sync: what follows is watched
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM `+histSchema+`.checkpoints WHERE resource_version > 0`).Scan(&n)
		if err == nil && n != 1 {
			err = fmt.Errorf("%d checkpoints", n)
		}
		return err
	})

	// Created, then changed by two field managers in turn, then deleted: every write is
	// watched, so each is one version. changed_by is the manager of the newest
	// managedFields entry, whose times have whole seconds: each write waits for the
	// second after the one before, so the newest entry is always the writer's.
	deps := kube.Clientset().AppsV1().Deployments(ns)
	d, err := deps.Create(ctx, histDeployment(ns), metav1.CreateOptions{FieldManager: "e2e-author"})
	if err != nil {
		t.Fatal(err)
	}
	rvs := []string{d.ResourceVersion}
	histNextSecond(t, d)
	d.Spec.Replicas = ptr.To[int32](2)
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{FieldManager: "e2e-scaler"}); err != nil {
		t.Fatal(err)
	}
	rvs = append(rvs, d.ResourceVersion)
	histNextSecond(t, d)
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27"
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{FieldManager: "e2e-deployer"}); err != nil {
		t.Fatal(err)
	}
	rvs = append(rvs, d.ResourceVersion)
	histNextSecond(t, d)
	if d, err = deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"frontend"}}}`),
		metav1.PatchOptions{FieldManager: "e2e-scaler"}); err != nil {
		t.Fatal(err)
	}
	rvs = append(rvs, d.ResourceVersion)
	last := d
	if err := deps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var rows []histRow
	eventually(t, 30*time.Second, func() error {
		rows = histRows(t, conn, ns)
		if len(rows) != 5 || rows[4].op != "delete" {
			return fmt.Errorf("%d changes rows, want 5 ending with the delete", len(rows))
		}
		return nil
	})
	// The stream itself, which everything below reads back.
	wantOps := []string{"create", "update", "update", "update", "delete"}
	wantBy := []string{"e2e-author/Update", "e2e-scaler/Update", "e2e-deployer/Update", "e2e-scaler/Update", "e2e-scaler/Update"}
	for i, r := range rows {
		if r.op != wantOps[i] || r.by != wantBy[i] || i < 4 && r.rv != rvs[i] {
			t.Fatalf("changes row %d: %s rv %s by %s; want %s rv %s by %s", i+1, r.op, r.rv, r.by, wantOps[i], append(rvs, "?")[i], wantBy[i])
		}
	}

	t.Run("the text shows every version in order with its manager and a diff of only what it changed", func(t *testing.T) {
		code, out := runCLI(t, "history", "deployments", "web", "-n", ns, "-c", cfg)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if want := fmt.Sprintf("deployments.apps %s/web in cluster e2e (sink warehouse): 5 versions\n", ns); !strings.HasPrefix(out, want) {
			t.Errorf("title: want %q in:\n%s", want, out)
		}
		sections := histSections(t, out)
		if len(sections) != 5 {
			t.Fatalf("%d versions, want 5:\n%s", len(sections), out)
		}
		for i, s := range sections {
			want := fmt.Sprintf("#%d  %s  %s  rv %s", rows[i].id, s.time, rows[i].op, rows[i].rv)
			if i == 4 {
				want += "  observed"
			}
			want += "  by " + rows[i].by
			if s.header != want {
				t.Errorf("version %d: header %q, want %q", i+1, s.header, want)
			}
		}
		// The first version is shown whole, as added lines.
		histMust(t, sections[0], `^@@ -0,0 \+1,\d+ @@$`, `^\+kind: Deployment$`, `^\+  replicas: 1$`, `^\+\s+(- )?image: nginx:1\.25$`)
		// Each later one shows its own change and nothing of the others'.
		histMust(t, sections[1], `^-  replicas: 1$`, `^\+  replicas: 2$`)
		histMustNot(t, sections[1], `^[-+].*image:`, `^[-+].*tier:`, `^\+kind:`)
		histMust(t, sections[2], `^-\s+(- )?image: nginx:1\.25$`, `^\+\s+(- )?image: nginx:1\.27$`)
		histMustNot(t, sections[2], `^[-+].*replicas:`, `^[-+].*tier:`)
		histMust(t, sections[3], `^\+    tier: frontend$`)
		histMustNot(t, sections[3], `^[-+].*replicas:`, `^[-+].*image:`, `^[-+].*generation:`)
		if sections[4].body != "(the object did not change besides its resourceVersion)\n" {
			t.Errorf("the delete's body:\n%s", sections[4].body)
		}
		for i, s := range sections {
			histMustNot(t, s, `^[-+ ].*resourceVersion`)
			if i > 0 {
				histMustNot(t, s, `^ ?@@ -0,0`)
			}
		}

		// Every form of the resource a config accepts names the same history, and without
		// -n the one namespace the name has history in is found.
		for _, args := range [][]string{
			{"deployments.apps", "web"}, {"apps/v1/deployments", "web"}, {"Deployment", "web"}, {"deployments", "web", "-n", ns},
		} {
			code, got := runCLI(t, append(append([]string{"history"}, args...), "-c", cfg)...)
			if code != 0 || got != out {
				t.Errorf("history %s: exit %d\n%s\nwant the output of history deployments web -n %s", strings.Join(args, " "), code, got, ns)
			}
		}
	})

	// The later subtests compare with the full history in JSON.
	entries := histJSON(t, "history", "deployments.apps", "web", "-n", ns, "-o", "json", "-c", cfg)
	if len(entries) != 5 {
		t.Fatalf("-o json: %d entries, want 5", len(entries))
	}

	t.Run("the JSON patches applied in order rebuild every version", func(t *testing.T) {
		doc := []byte(`{}`)
		for i, e := range entries {
			if e.ID != rows[i].id || e.Op != rows[i].op || e.ResourceVersion != rows[i].rv || e.ChangedBy != rows[i].by ||
				e.UID != string(last.UID) || e.Inferred || e.Reason != "" || e.Snapshot {
				t.Errorf("entry %d: id %d, %s rv %s by %s, uid %s, inferred %v %q, snapshot %v; want id %d, %s rv %s by %s, uid %s, observed, not a snapshot",
					i+1, e.ID, e.Op, e.ResourceVersion, e.ChangedBy, e.UID, e.Inferred, e.Reason, e.Snapshot, rows[i].id, rows[i].op, rows[i].rv, rows[i].by, last.UID)
			}
			p, err := jsonpatch.DecodePatch(e.Patch)
			if err != nil {
				t.Fatalf("entry %d: %v\n%s", i+1, err, e.Patch)
			}
			if doc, err = p.Apply(doc); err != nil {
				t.Fatalf("entry %d: apply %s: %v", i+1, e.Patch, err)
			}
			if !histSameJSON(t, string(doc), rows[i].object) {
				t.Errorf("after patch %d:\n%s\nwant the stored version:\n%s", i+1, doc, rows[i].object)
			}
		}
		histHasOp(t, entries[0], histOp{Op: "replace", Path: ""})
		histHasOp(t, entries[1], histOp{Op: "replace", Path: "/spec/replicas", Value: json.RawMessage(`2`)})
		histHasOp(t, entries[2], histOp{Op: "replace", Path: "/spec/template/spec/containers/0/image", Value: json.RawMessage(`"nginx:1.27"`)})
		histHasOp(t, entries[3], histOp{Op: "add", Path: "/metadata/labels/tier", Value: json.RawMessage(`"frontend"`)})

		// The last version is the cluster's last state of the object.
		var final appsv1.Deployment
		if err := json.Unmarshal(doc, &final); err != nil {
			t.Fatal(err)
		}
		if final.UID != last.UID || !reflect.DeepEqual(final.Spec, last.Spec) || !reflect.DeepEqual(final.Labels, last.Labels) {
			t.Errorf("the rebuilt object: uid %s, spec %+v, labels %v; want the last write's uid %s, spec %+v, labels %v",
				final.UID, final.Spec, final.Labels, last.UID, last.Spec, last.Labels)
		}
	})

	t.Run("since shows the versions observed at or after it and diffs the first of them against its predecessor", func(t *testing.T) {
		// Exactly the third version's observedAt: the boundary is included, so a time
		// copied from a version's header shows that version on.
		from := entries[2].ObservedAt.Format(time.RFC3339Nano)
		code, out := runCLI(t, "history", "deployments", "web", "-n", ns, "--since", from, "-c", cfg)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		sections := histSections(t, out)
		var ids []int64
		for _, s := range sections {
			ids = append(ids, s.id)
		}
		if want := []int64{rows[2].id, rows[3].id, rows[4].id}; !slices.Equal(ids, want) {
			t.Fatalf("--since %s: versions %v, want %v:\n%s", from, ids, want, out)
		}
		if !strings.Contains(out, ": 3 versions since ") {
			t.Errorf("no title counting 3 versions since:\n%s", out)
		}
		histMust(t, sections[0], `^-\s+(- )?image: nginx:1\.25$`, `^\+\s+(- )?image: nginx:1\.27$`)
		histMustNot(t, sections[0], `^\+kind:`)

		got := histJSON(t, "history", "deployments", "web", "-n", ns, "--since", from, "-o", "json", "-c", cfg)
		if len(got) != 3 || !reflect.DeepEqual(got, entries[2:]) {
			t.Errorf("--since %s -o json: %d entries, want the last 3 of the full history, patches included", from, len(got))
		}
		if got := histJSON(t, "history", "deployments", "web", "-n", ns, "--since", "1h", "-o", "json", "-c", cfg); len(got) != 5 {
			t.Errorf("--since 1h: %d entries, want 5", len(got))
		}
		if got := histJSON(t, "history", "deployments", "web", "-n", ns, "--since", time.Now().Add(time.Minute).Format(time.RFC3339), "-o", "json", "-c", cfg); got == nil || len(got) != 0 {
			t.Errorf("--since a minute ahead: %v, want an empty array", got)
		}
	})

	t.Run("an unknown name or resource exits 1 naming what was not found", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"deployments", "nope", "-n", ns}, fmt.Sprintf("kube-cdc: no history of deployments.apps %s/nope in cluster e2e (sink warehouse)\n", ns)},
			{[]string{"deployments", "nope"}, `kube-cdc: no history of deployments.apps "nope" in cluster e2e (sink warehouse)` + "\n"},
			{[]string{"deployments", "web", "-n", "elsewhere"}, "kube-cdc: no history of deployments.apps elsewhere/web in cluster e2e (sink warehouse)\n"},
			{[]string{"widgets", "web"}, `kube-cdc: sink warehouse, cluster e2e: resource "widgets" is none of the resources recorded (deployments.apps); name it as a plural, plural.group, group/version/resource or kind` + "\n"},
			{[]string{"deployments", "web", "--cluster", "other"}, `kube-cdc: sink warehouse, cluster other: resource "deployments" is none of the resources recorded (nothing yet)`},
			{[]string{"deployments", "web", "--since", "yesterday"}, `kube-cdc: --since "yesterday": want a positive duration`},
			{[]string{"deployments", "web", "--sink", "nope"}, `kube-cdc: --sink nope: no sink of that name in the config`},
		} {
			code, out := runCLI(t, append(append([]string{"history"}, tc.args...), "-c", cfg)...)
			if code != 1 || !strings.HasPrefix(out, tc.want) {
				t.Errorf("history %s: exit %d\n%s\nwant exit 1 and %q", strings.Join(tc.args, " "), code, out, tc.want)
			}
		}
	})

	t.Run("the SQL function lists the same versions with the paths each changed", func(t *testing.T) {
		// A session of its own, on the default search_path, which does not name the schema.
		sqlConn := connect(t, dsn)
		q := `SELECT id, op, rv::text, changed_by, changed FROM ` + histSchema + `.history('deployments.apps', $1, 'web')`
		got, err := pgx.CollectRows(histQuery(t, sqlConn, q, ns), func(r pgx.CollectableRow) (histSQLRow, error) {
			var s histSQLRow
			err := r.Scan(&s.id, &s.op, &s.rv, &s.by, &s.changed)
			return s, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 {
			t.Fatalf("%d rows, want 5: %+v", len(got), got)
		}
		want := [][]string{
			nil, // the top-level keys, below
			{"/metadata/generation", "/spec/replicas"},
			{"/metadata/generation", "/spec/template/spec/containers/0/image"},
			{"/metadata/labels/tier"},
			{},
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(rows[0].object), &top); err != nil {
			t.Fatal(err)
		}
		for k := range top {
			want[0] = append(want[0], "/"+k)
		}
		sort.Strings(want[0])
		for i, g := range got {
			if g.id != rows[i].id || g.op != rows[i].op || g.rv != rows[i].rv || g.by != rows[i].by {
				t.Errorf("row %d: %+v; want id %d, %s rv %s by %s", i+1, g, rows[i].id, rows[i].op, rows[i].rv, rows[i].by)
			}
			if !slices.Equal(g.changed, want[i]) || g.changed == nil {
				t.Errorf("row %d: changed %q, want %q", i+1, g.changed, want[i])
			}
			if i == 0 {
				continue
			}
			// The paths of the CLI's JSON Patch, but for the resourceVersion the rv column has.
			var ops []histOp
			if err := json.Unmarshal(entries[i].Patch, &ops); err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, op := range ops {
				if op.Path != "/metadata/resourceVersion" {
					paths = append(paths, op.Path)
				}
			}
			sort.Strings(paths)
			if !slices.Equal(paths, g.changed) && len(paths)+len(g.changed) > 0 {
				t.Errorf("row %d: changed %q, but the JSON Patch's paths are %q", i+1, g.changed, paths)
			}
		}
		if n := count(t, sqlConn, `SELECT count(*) FROM `+histSchema+`.history('deployments.apps', $1, 'web', 'e2e')`, ns); n != 5 {
			t.Errorf("cluster e2e: %d rows, want 5", n)
		}
		if n := count(t, sqlConn, `SELECT count(*) FROM `+histSchema+`.history('deployments.apps', $1, 'web', 'other')`, ns); n != 0 {
			t.Errorf("cluster other: %d rows, want 0", n)
		}
	})
}

type histSQLRow struct {
	id         int64
	op, rv, by string
	changed    []string
}

func histDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
			},
		},
	}
}

// histNextSecond waits until the clock is past the second of obj's newest managedFields
// entry (the apiserver runs on this machine's clock), so the next write's entry is newer.
func histNextSecond(t *testing.T, obj metav1.Object) {
	t.Helper()
	var newest time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Time != nil && e.Time.After(newest) {
			newest = e.Time.Time
		}
	}
	eventually(t, 5*time.Second, func() error {
		if now := time.Now(); now.Before(newest.Truncate(time.Second).Add(time.Second)) {
			return fmt.Errorf("now %s, newest managedFields entry at %s", now, newest)
		}
		return nil
	})
}

func histRows(t *testing.T, conn *pgx.Conn, ns string) []histRow {
	t.Helper()
	rows, err := pgx.CollectRows(histQuery(t, conn, `SELECT id, op, resource_version::text, changed_by, coalesce(object::text, '')
		FROM `+histSchema+`.changes WHERE resource = 'deployments' AND namespace = $1 AND name = 'web' ORDER BY id`, ns),
		func(r pgx.CollectableRow) (histRow, error) {
			var h histRow
			err := r.Scan(&h.id, &h.op, &h.rv, &h.by, &h.object)
			return h, err
		})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func histQuery(t *testing.T, conn *pgx.Conn, sql string, args ...any) pgx.Rows {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rows
}

// histSection is one version of history's text output.
type histSection struct {
	id                 int64
	header, time, body string
}

var histHeader = regexp.MustCompile(`(?m)^#(\d+)  (\S+)  .*$`)

func histSections(t *testing.T, out string) []histSection {
	t.Helper()
	var s []histSection
	idx := histHeader.FindAllStringSubmatchIndex(out, -1)
	for i, m := range idx {
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		var id int64
		fmt.Sscan(out[m[2]:m[3]], &id)
		body := strings.TrimSuffix(out[m[1]+1:end], "\n") + "\n" // the blank line between versions is not the body's
		s = append(s, histSection{id: id, header: out[m[0]:m[1]], time: out[m[4]:m[5]], body: body})
	}
	return s
}

func histMust(t *testing.T, s histSection, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(s.body) {
			t.Errorf("version #%d has no line matching %s:\n%s", s.id, p, s.body)
		}
	}
}

func histMustNot(t *testing.T, s histSection, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if l := regexp.MustCompile(`(?m)` + p).FindString(s.body); l != "" {
			t.Errorf("version #%d has the line %q (matching %s):\n%s", s.id, l, p, s.body)
		}
	}
}

func histJSON(t *testing.T, args ...string) []histEntry {
	t.Helper()
	d := start(t, args...)
	code, stderr := d.wait(60 * time.Second)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	var entries []histEntry
	if err := json.Unmarshal([]byte(d.out.String()), &entries); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, d.out.String())
	}
	return entries
}

func histHasOp(t *testing.T, e histEntry, want histOp) {
	t.Helper()
	var ops []histOp
	if err := json.Unmarshal(e.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Op == want.Op && op.Path == want.Path && (want.Value == nil || string(op.Value) == string(want.Value)) {
			return
		}
	}
	t.Errorf("entry %d (%s): no %s %q %s in its patch %s", e.ID, e.Op, want.Op, want.Path, want.Value, e.Patch)
}

// histSameJSON compares documents whatever their key order and spacing.
func histSameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestHistoryWithoutANamespaceTakesTheOneThatHoldsTheNameAndRefusesToChooseAmongSeveral(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	nsA, nsB := namespace(t, "a"), namespace(t, "b")
	dsn := pg.NewDatabase(t)
	cfg := pgConfig(t, dsn, "  - name: configmaps\n    namespaces: ["+nsA+", "+nsB+"]", "")
	start(t, "run", "-c", cfg)
	for _, o := range []struct{ ns, name string }{{nsA, "settings"}, {nsB, "settings"}, {nsB, "solo"}} {
		if _, err := kube.Clientset().CoreV1().ConfigMaps(o.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.name}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	conn := connect(t, dsn)
	eventually(t, 60*time.Second, func() error { // the daemon may not have migrated yet
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE name IN ('settings', 'solo')`).Scan(&n)
		if err == nil && n != 3 {
			err = fmt.Errorf("%d changes rows, want 3", n)
		}
		return err
	})

	code, out := runCLI(t, "history", "configmaps", "settings", "-c", cfg)
	if want := fmt.Sprintf(`kube-cdc: configmaps "settings" has history in namespaces %s, %s in cluster e2e (sink warehouse): choose one with -n`+"\n", nsA, nsB); code != 1 || out != want {
		t.Errorf("history configmaps settings: exit %d\n%s\nwant exit 1 and %q", code, out, want)
	}
	for _, tc := range []struct {
		args  []string
		title string
	}{
		{[]string{"configmaps", "settings", "-n", nsB}, nsB + "/settings"},
		{[]string{"configmaps", "settings", "-n", nsA}, nsA + "/settings"},
		{[]string{"configmaps", "solo"}, nsB + "/solo"},
	} {
		code, out := runCLI(t, append(append([]string{"history"}, tc.args...), "-c", cfg)...)
		if want := "configmaps " + tc.title + " in cluster e2e (sink warehouse): 1 version\n"; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("history %s: exit %d\n%s\nwant exit 0 and %q", strings.Join(tc.args, " "), code, out, want)
		}
	}
}
