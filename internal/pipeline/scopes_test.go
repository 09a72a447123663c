package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// scopeEnv is a real apiserver and PostgreSQL database, and runs of the pipeline with
// configurable scopes of ConfigMaps into one PostgreSQL sink, wired as cmd/kube-cdc does.
type scopeEnv struct {
	t       *testing.T
	ctx     context.Context
	cs      kubernetes.Interface
	clients *source.Clients
	dsn     string
	conn    *pgx.Conn
	log     *slog.Logger

	stop func() // ends the running pipeline, if any, and waits for it
}

func newScopeEnv(t *testing.T, namespaces ...string) *scopeEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	pg := testenv.NewPostgres(t)
	e := &scopeEnv{t: t, ctx: ctx, cs: kube.Clientset(), dsn: pg.NewDatabase(t),
		log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, ns := range namespaces {
		if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if e.clients, err = source.NewClients(rest.CopyConfig(kube.Config), source.ClientOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.conn, err = pgx.Connect(ctx, e.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop()
		}
		e.conn.Close(context.Background())
	})
	return e
}

// put creates or relabels the ConfigMap ns/name with label app.
func (e *scopeEnv) put(ns, name, app string) {
	e.t.Helper()
	cms := e.cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}, Data: map[string]string{"k": "v"}}
		if _, err := cms.Create(e.ctx, cm, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	cm.Labels = map[string]string{"app": app}
	if _, err := cms.Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// start runs the pipeline with specs (ConfigMaps) in the background until stop.
func (e *scopeEnv) start(specs ...source.Spec) {
	e.t.Helper()
	if e.stop != nil {
		e.stop()
	}
	targets, err := source.Resolve(e.clients.Discovery, specs)
	if err != nil {
		e.t.Fatal(err)
	}
	scopes := source.GroupScopes(e.clients, targets, e.log)
	pts := make([]pipeline.Target, len(targets))
	for i, t := range targets {
		pts[i] = pipeline.Fixture{Resource: t.Resource, Owns: scopes[i].Owns(t), Lookup: func(ctx context.Context, held map[change.Key]change.Entry) (map[change.Key]change.Presence, error) {
			return scopes[i].Lookup(ctx, t, held)
		}, Sweeps: scopes[i].Sweeps(t),
			NewStream: func() pipeline.Streamer {
				return &source.Stream{Clients: e.clients, Target: t, Scopes: scopes[i], Log: e.log,
					Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
			}}.Target()
	}
	s, err := postgres.New(e.ctx, "warehouse", "test", postgres.Options{DSN: e.dsn, Migrate: true}, e.log)
	if err != nil {
		e.t.Fatal(err)
	}
	p := pipeline.New(pipeline.Options{Cluster: "test", Log: e.log,
		Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}},
		[]pipeline.Sink{s}, pts)
	ctx, cancel := context.WithCancel(e.ctx)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	e.stop = func() {
		cancel()
		if err := <-errc; err != nil {
			e.t.Errorf("pipeline: %v", err)
		}
		s.Close()
		e.stop = nil
	}
}

// relist forgets every checkpoint, so the next start relists every scope.
func (e *scopeEnv) relist() {
	e.t.Helper()
	if _, err := e.conn.Exec(e.ctx, `DELETE FROM kube_cdc.checkpoints`); err != nil {
		e.t.Fatal(err)
	}
}

// checkpoints is the number of checkpoint rows: a relist writes its scope's row with
// the batch that ends it, inferred deletes included.
func (e *scopeEnv) checkpoints() int {
	var n int
	if err := e.conn.QueryRow(e.ctx, `SELECT count(*) FROM kube_cdc.checkpoints`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// row is an objects row: "live", or "deleted" with "(inferred, REASON)".
func (e *scopeEnv) row(ns, name string) string {
	e.t.Helper()
	var deleted, inferred bool
	var reason string
	err := e.conn.QueryRow(e.ctx, `SELECT deleted_at IS NOT NULL, delete_inferred, coalesce(delete_reason, '')
		FROM kube_cdc.objects WHERE cluster = 'test' AND resource = 'configmaps' AND namespace = $1 AND name = $2`, ns, name).
		Scan(&deleted, &inferred, &reason)
	switch {
	case err == pgx.ErrNoRows:
		return "absent"
	case err != nil:
		e.t.Fatal(err)
	case !deleted:
		return "live"
	case inferred:
		return "deleted (inferred, " + reason + ")"
	}
	return "deleted"
}

// deletes lists the delete changes as "ns/name inferred=… reason=…", in id order.
func (e *scopeEnv) deletes() []string {
	e.t.Helper()
	rows, err := e.conn.Query(e.ctx, `SELECT namespace || '/' || name || ' inferred=' || inferred || ' reason=' || coalesce(reason, '')
		FROM kube_cdc.changes WHERE op = 'delete' ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *scopeEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *scopeEnv) allLive(ns string, names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if e.row(ns, n) != "live" {
				return false
			}
		}
		return true
	}
}

func selectorScopes(ns string, apps ...string) []source.Spec {
	var specs []source.Spec
	for _, a := range apps {
		specs = append(specs, source.Spec{Name: "configmaps", Namespaces: []string{ns}, LabelSelector: "app=" + a})
	}
	return specs
}

// Issue 9: two scopes of one resource that differ only by label selector, in one sink.
// Each scope's relist saw the other's objects in the key index and not in its LIST, and
// tombstoned them; the RV guard then kept them deleted.
func TestTwoSelectorScopesOfOneResourceNeverTombstoneEachOthersLiveObjects(t *testing.T) {
	const ns = "sel"
	e := newScopeEnv(t, ns)
	names := []string{"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}
	for _, n := range names {
		e.put(ns, n, n[:1])
	}
	specs := selectorScopes(ns, "a", "b")
	e.start(specs...)
	e.eventually("both scopes relist and every object is live", func() bool { return e.checkpoints() == 2 && e.allLive(ns, names...)() })
	for range 2 {
		e.stop()
		e.relist()
		e.start(specs...)
		e.eventually("both scopes relist again", func() bool { return e.checkpoints() == 2 })
	}
	e.stop()
	for _, n := range names {
		if got := e.row(ns, n); got != "live" {
			t.Errorf("%s/%s is %s after the relists, want live", ns, n, got)
		}
	}
	if d := e.deletes(); len(d) > 0 {
		t.Errorf("the relists wrote deletes %v, want none", d)
	}
}

// An object relabelled out of every selector still exists: it is tombstoned with reason
// out-of-scope (inferred), not recorded as a delete in the cluster; relabelled into the
// other scope it stays live throughout; relabelled back it lives again. Both through a
// watch (the apiserver sends DELETED when an object stops matching) and through a relist.
func TestAnObjectRelabelledIntoNoScopeIsTombstonedOutOfScopeAndRevivesWhenRelabelledBack(t *testing.T) {
	const ns = "relabel"
	e := newScopeEnv(t, ns)
	names := []string{"a-0", "a-1", "a-2", "b-0"}
	for _, n := range names {
		e.put(ns, n, n[:1])
	}
	specs := selectorScopes(ns, "a", "b")
	e.start(specs...)
	e.eventually("every object is live", func() bool { return e.checkpoints() == 2 && e.allLive(ns, names...)() })

	// Watch: a-0 leaves every scope, a-1 moves to scope b.
	e.put(ns, "a-0", "c")
	e.put(ns, "a-1", "b")
	outOfScope := "deleted (inferred, " + change.ReasonOutOfScope + ")"
	e.eventually("a-0 is tombstoned out of scope", func() bool { return e.row(ns, "a-0") == outOfScope })
	e.put(ns, "a-2", "a") // an event after a-1's, to know scope a's watch passed it
	time.Sleep(500 * time.Millisecond)
	if got := e.row(ns, "a-1"); got != "live" {
		t.Errorf("a-1, moved from scope a to scope b, is %s, want live", got)
	}
	e.put(ns, "a-0", "a")
	e.eventually("a-0, relabelled back, is live", func() bool { return e.row(ns, "a-0") == "live" })

	// Relist: b-0 leaves every scope while kube-cdc is stopped, then comes back.
	e.stop()
	e.put(ns, "b-0", "c")
	e.relist()
	e.start(specs...)
	e.eventually("b-0 is tombstoned out of scope by the relist", func() bool { return e.row(ns, "b-0") == outOfScope })
	e.eventually("both scopes relist", func() bool { return e.checkpoints() == 2 })
	e.stop()
	e.put(ns, "b-0", "b")
	e.relist()
	e.start(specs...)
	e.eventually("b-0, relabelled back, is live", func() bool { return e.row(ns, "b-0") == "live" })
	e.eventually("both scopes relist", func() bool { return e.checkpoints() == 2 })
	e.stop()

	want := []string{ns + "/a-0 inferred=true reason=out-of-scope", ns + "/b-0 inferred=true reason=out-of-scope"}
	if got := e.deletes(); !slices.Equal(got, want) {
		t.Errorf("deletes = %v, want %v", got, want)
	}
	for _, n := range names {
		if got := e.row(ns, n); got != "live" {
			t.Errorf("%s/%s is %s, want live", ns, n, got)
		}
	}
}

// An inferred delete is written at the LIST's RV, above the object's own. One written
// wrongly (as issue 9's scopes did) used to keep a live object deleted forever: every
// later LIST shows it at its own, lower, RV, which the RV guard rejected. The next relist
// that lists it revives it.
func TestALiveObjectTombstonedWronglyIsRevivedByTheNextRelist(t *testing.T) {
	const ns = "revive"
	e := newScopeEnv(t, ns)
	for i := range 3 {
		e.put(ns, fmt.Sprintf("cm-%d", i), "a")
	}
	spec := source.Spec{Name: "configmaps", Namespaces: []string{ns}}
	e.start(spec)
	e.eventually("every object is live", func() bool { return e.checkpoints() == 1 && e.allLive(ns, "cm-0", "cm-1", "cm-2")() })
	e.stop()

	// What the old reconcile diff wrote: an inferred delete at the LIST's RV.
	var listRV change.RV
	if err := e.conn.QueryRow(e.ctx, `SELECT resource_version FROM kube_cdc.checkpoints`).Scan(&listRV); err != nil {
		t.Fatal(err)
	}
	var uid string
	if err := e.conn.QueryRow(e.ctx, `SELECT uid FROM kube_cdc.objects WHERE name = 'cm-1'`).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(e.ctx, "warehouse", "test", postgres.Options{DSN: e.dsn}, e.log)
	if err != nil {
		t.Fatal(err)
	}
	res := change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	err = s.Write(e.ctx, change.Batch{Resource: res, Changes: []change.Change{{Cluster: "test", Resource: res,
		Key: change.Key{Namespace: ns, Name: "cm-1"}, UID: uid, RV: listRV, Op: change.OpDelete, Inferred: true,
		Reason: change.ReasonGone, ObservedAt: time.Now()}}})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := e.row(ns, "cm-1"); got == "live" {
		t.Fatal("the wrong tombstone did not land")
	}

	e.relist()
	e.start(spec)
	e.eventually("the relist ends", func() bool { return e.checkpoints() == 1 })
	time.Sleep(200 * time.Millisecond)
	e.stop()
	if got := e.row(ns, "cm-1"); got != "live" {
		t.Errorf("cm-1, alive in the cluster and listed again, is %s, want live", got)
	}
}

// A scope narrowed between two runs: namespaces [a, b] became [a]. b's rows used to stay
// live and frozen forever (nothing examined them: a's scope was unchanged and watched
// from its checkpoint) and b's checkpoint row stayed behind. Now the sink's stale scope
// makes a relist of the resource tombstone b's rows out of scope, and the stale
// checkpoint is forgotten.
func TestAScopeNarrowedBetweenRunsTombstonesWhatItLeftOutOfScope(t *testing.T) {
	e := newScopeEnv(t, "keep", "drop")
	for i := range 2 {
		e.put("keep", fmt.Sprintf("cm-%d", i), "a")
		e.put("drop", fmt.Sprintf("cm-%d", i), "a")
	}
	e.start(source.Spec{Name: "configmaps", Namespaces: []string{"keep", "drop"}})
	e.eventually("both namespaces are live", func() bool {
		return e.checkpoints() == 2 && e.allLive("keep", "cm-0", "cm-1")() && e.allLive("drop", "cm-0", "cm-1")()
	})
	e.stop()

	e.start(source.Spec{Name: "configmaps", Namespaces: []string{"keep"}})
	outOfScope := "deleted (inferred, " + change.ReasonOutOfScope + ")"
	e.eventually("drop's rows are tombstoned out of scope and its checkpoint forgotten", func() bool {
		return e.row("drop", "cm-0") == outOfScope && e.row("drop", "cm-1") == outOfScope && e.checkpoints() == 1
	})
	e.put("keep", "cm-2", "a")
	e.eventually("keep streams on", e.allLive("keep", "cm-0", "cm-1", "cm-2"))
	e.stop()
	want := []string{"drop/cm-0 inferred=true reason=out-of-scope", "drop/cm-1 inferred=true reason=out-of-scope"}
	got := e.deletes()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("deletes = %v, want %v", got, want)
	}
}
