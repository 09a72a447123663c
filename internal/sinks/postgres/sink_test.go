package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
	"github.com/kube-cdc/kube-cdc/migrations"
)

const cluster = "test"

var configmaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newSink returns a migrated sink named "warehouse" on a fresh database (a copy of the
// migrated template), and the DSN.
func newSink(t *testing.T, opts Options) (*Sink, string) {
	t.Helper()
	if opts.DSN == "" {
		opts.DSN = migrated.NewDatabase(t)
		opts.Migrate = true
	}
	s, err := New(testCtx(t), "warehouse", cluster, opts, testLog(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, opts.DSN
}

// cm is a ConfigMap change; its object records the RV so tests can see which version won.
func cm(name, uid string, rv change.RV, op change.Op) change.Change {
	c := change.Change{
		Cluster: cluster, Resource: configmaps,
		Key: change.Key{Namespace: "ns", Name: name}, UID: uid, RV: rv, Op: op,
		Labels: json.RawMessage(`{"app":"` + name + `"}`), ChangedBy: "kubectl/Update",
		ObservedAt: time.Now(),
	}
	c.Object = json.RawMessage(fmt.Sprintf(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d","labels":{"app":%q}},"data":{"rv":"%d"}}`,
		name, uid, rv, name, rv))
	return c
}

// inferredDelete is what the reconcile diff emits: no object, the LIST's RV.
func inferredDelete(name, uid string, rv change.RV) change.Change {
	c := cm(name, uid, rv, change.OpDelete)
	c.Inferred, c.Object, c.Labels = true, nil, nil
	return c
}

func batch(checkpoint change.RV, changes ...change.Change) change.Batch {
	return change.Batch{Resource: configmaps, Changes: changes, Checkpoint: checkpoint}
}

func write(t *testing.T, s *Sink, b change.Batch) {
	t.Helper()
	if err := s.Write(testCtx(t), b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// objectRow is what a test reads back of one objects row.
type objectRow struct {
	UID       string
	RV        change.RV
	DataRV    string // object->'data'->>'rv': which version's object the row holds; "<null>" without object
	Labels    string
	Deleted   bool
	Inferred  bool
	CreatedAt time.Time
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func readObject(t *testing.T, dsn, name string) (objectRow, bool) {
	t.Helper()
	var r objectRow
	err := connect(t, dsn).QueryRow(testCtx(t), `SELECT uid, resource_version, coalesce(object->'data'->>'rv', '<null>'), labels::text,
			deleted_at IS NOT NULL, delete_inferred, created_at
		FROM kube_cdc.objects WHERE cluster = $1 AND api_group = '' AND resource = 'configmaps'
		  AND namespace = 'ns' AND name = $2`, cluster, name).
		Scan(&r.UID, &r.RV, &r.DataRV, &r.Labels, &r.Deleted, &r.Inferred, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func mustObject(t *testing.T, dsn, name string) objectRow {
	t.Helper()
	r, ok := readObject(t, dsn, name)
	if !ok {
		t.Fatalf("no objects row for ns/%s", name)
	}
	return r
}

func count(t *testing.T, dsn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := connect(t, dsn).QueryRow(testCtx(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// changesRows lists (name, rv, op) of every changes row in id order.
func changesRows(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t),
		`SELECT name || '@' || resource_version || ':' || op || CASE WHEN inferred THEN '(inferred)' ELSE '' END
		   FROM kube_cdc.changes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkpoint(t *testing.T, s *Sink, res change.Resource) change.RV {
	t.Helper()
	rv, err := s.Checkpoint(testCtx(t), res)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	return rv
}

func TestAFirstBatchLandsInObjectsChangesAndCheckpoints(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	if rv := checkpoint(t, s, configmaps); rv != 0 {
		t.Fatalf("checkpoint before any write = %d, want 0", rv)
	}
	snap := cm("a", "uid-a", 10, change.OpCreate)
	snap.Snapshot = true
	write(t, s, batch(15, snap, cm("b", "uid-b", 11, change.OpCreate), cm("b", "uid-b", 12, change.OpUpdate)))

	a := mustObject(t, dsn, "a")
	if a.UID != "uid-a" || a.RV != 10 || a.DataRV != "10" || a.Deleted || a.Labels != `{"app": "a"}` {
		t.Errorf("row a = %+v", a)
	}
	var apiVersion, kind, changedBy string
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT api_version, kind, changed_by FROM kube_cdc.objects WHERE name = 'a'`).
		Scan(&apiVersion, &kind, &changedBy); err != nil || apiVersion != "v1" || kind != "ConfigMap" || changedBy != "kubectl/Update" {
		t.Errorf("a: api_version %q kind %q changed_by %q err %v", apiVersion, kind, changedBy, err)
	}
	if b := mustObject(t, dsn, "b"); b.RV != 12 || b.DataRV != "12" {
		t.Errorf("row b = %+v, want RV 12", b)
	}
	if got, want := changesRows(t, dsn), []string{"a@10:create", "b@11:create", "b@12:update"}; !slices.Equal(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE name = 'a' AND snapshot AND object->'data'->>'rv' = '10'`); n != 1 {
		t.Errorf("snapshot change of a with its object: %d rows, want 1", n)
	}
	if rv := checkpoint(t, s, configmaps); rv != 15 {
		t.Errorf("checkpoint = %d, want 15", rv)
	}
	// Checkpoints are per scope: another scope of the same resource has none yet.
	scoped := configmaps
	scoped.Scope = "ns=team-a"
	if rv := checkpoint(t, s, scoped); rv != 0 {
		t.Errorf("checkpoint of another scope = %d, want 0", rv)
	}
}

func TestReplayingABatchInsertsNothingTwice(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	b := batch(20, cm("a", "uid-a", 10, change.OpCreate), cm("a", "uid-a", 11, change.OpUpdate),
		cm("b", "uid-b", 12, change.OpCreate), cm("b", "uid-b", 13, change.OpDelete))
	write(t, s, b)
	before := mustObject(t, dsn, "a")
	write(t, s, b)
	write(t, s, b)

	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 4 {
		t.Errorf("changes rows after three writes of one batch = %d, want 4", n)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects`); n != 2 {
		t.Errorf("objects rows = %d, want 2", n)
	}
	if after := mustObject(t, dsn, "a"); after != before {
		t.Errorf("replay changed row a: %+v, was %+v", after, before)
	}
	// Replaying an older batch keeps the checkpoint where it was.
	write(t, s, batch(11, cm("a", "uid-a", 10, change.OpCreate)))
	if rv := checkpoint(t, s, configmaps); rv != 20 {
		t.Errorf("checkpoint after replaying an older batch = %d, want 20", rv)
	}
	if a := mustObject(t, dsn, "a"); a.RV != 11 {
		t.Errorf("row a after an older replay has RV %d, want 11", a.RV)
	}
}

func TestAnOlderResourceVersionNeverOverwritesANewerOne(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(30, cm("a", "uid-a", 30, change.OpUpdate)))
	write(t, s, batch(0, cm("a", "uid-a", 20, change.OpUpdate)))
	if a := mustObject(t, dsn, "a"); a.RV != 30 || a.DataRV != "30" {
		t.Errorf("row a = %+v, want RV 30 and its object", a)
	}
	// An older delete does not delete a newer object either.
	write(t, s, batch(0, cm("a", "uid-a", 25, change.OpDelete)))
	if a := mustObject(t, dsn, "a"); a.Deleted || a.RV != 30 {
		t.Errorf("row a after an older delete = %+v, want live at RV 30", a)
	}
	// The changes log still records both: it is an audit trail, not current state.
	if got, want := changesRows(t, dsn), []string{"a@30:update", "a@20:update", "a@25:delete"}; !slices.Equal(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
}

func TestADeleteSoftDeletesTheRowAndRecordsWhetherItWasInferred(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(11, cm("observed", "uid-o", 10, change.OpCreate), cm("inferred", "uid-i", 11, change.OpCreate)))
	write(t, s, batch(21, cm("observed", "uid-o", 20, change.OpDelete), inferredDelete("inferred", "uid-i", 21)))

	o := mustObject(t, dsn, "observed")
	if !o.Deleted || o.Inferred || o.RV != 20 || o.DataRV != "20" {
		t.Errorf("observed delete: %+v, want deleted, not inferred, RV 20 with the delete's last object", o)
	}
	i := mustObject(t, dsn, "inferred")
	if !i.Deleted || !i.Inferred || i.RV != 21 || i.DataRV != "11" || i.UID != "uid-i" || i.Labels != `{"app": "inferred"}` {
		t.Errorf("inferred delete: %+v, want deleted, inferred, RV 21, keeping the last known object and labels", i)
	}
	if got, want := changesRows(t, dsn)[2:], []string{"observed@20:delete", "inferred@21:delete(inferred)"}; !slices.Equal(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE name = 'inferred' AND op = 'delete' AND object IS NULL`); n != 1 {
		t.Errorf("the inferred delete's changes row should have a NULL object; %d such rows", n)
	}
	// A delete of an object never seen still leaves a tombstone.
	write(t, s, batch(0, inferredDelete("never-seen", "uid-n", 30)))
	if n := mustObject(t, dsn, "never-seen"); !n.Deleted || !n.Inferred || n.DataRV != "<null>" {
		t.Errorf("tombstone of an unseen object = %+v", n)
	}
}

// An object's end is recorded once: an inferred delete of a key already tombstoned for
// the same uid (two scopes covering the key both infer it, at their own LIST's RV; CI saw
// the second row) adds no changes row, in either write mode; one of another uid, or after
// the batch revived the key, does.
func TestAnInferredDeleteOfAnObjectAlreadyTombstonedAddsNoSecondRow(t *testing.T) {
	t.Parallel()
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			s, dsn := newSink(t, Options{})
			write(t, s, batch(11, append(mode.pad(11), cm("gone", "uid-g", 10, change.OpCreate), cm("again", "uid-a", 11, change.OpCreate))...))
			write(t, s, batch(20, append(mode.pad(20), inferredDelete("gone", "uid-g", 20), cm("again", "uid-a", 19, change.OpDelete))...))
			write(t, s, batch(21, append(mode.pad(21), inferredDelete("gone", "uid-g", 21), inferredDelete("again", "uid-a", 21))...))
			// A new uid under the key, deleted: its own end.
			write(t, s, batch(31, append(mode.pad(31), cm("gone", "uid-g2", 30, change.OpCreate))...))
			write(t, s, batch(32, append(mode.pad(32), inferredDelete("gone", "uid-g2", 32))...))
			// Listed again (a snapshot revives the row), then inferred deleted in the same
			// batch: the batch changed the key before the delete.
			snap := cm("gone", "uid-g2", 33, change.OpUpdate)
			snap.Snapshot, snap.ListRV = true, 33
			write(t, s, batch(34, append(mode.pad(34), snap, inferredDelete("gone", "uid-g2", 34))...))
			var got []string
			for _, r := range changesRows(t, dsn) {
				if !strings.HasPrefix(r, "pad-") {
					got = append(got, r)
				}
			}
			want := []string{"gone@10:create", "again@11:create", "gone@20:delete(inferred)", "again@19:delete",
				"gone@30:create", "gone@32:delete(inferred)", "gone@33:update", "gone@34:delete(inferred)"}
			if !slices.Equal(got, want) {
				t.Errorf("changes = %v, want %v", got, want)
			}
			if o := mustObject(t, dsn, "gone"); !o.Deleted || o.UID != "uid-g2" {
				t.Errorf("gone's row: %+v, want deleted, uid-g2", o)
			}
		})
	}
}

// Two writers inferring the same objects' deletes at once (two scopes' relists, each at
// its own LIST's RV) record each object's end once: the second waits for the first's
// commit and then sees its tombstone.
func TestConcurrentInferredDeletesOfOneObjectAddOneRow(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	const keys = 20
	var creates []change.Change
	for i := range keys {
		creates = append(creates, cm(fmt.Sprintf("k-%d", i), fmt.Sprintf("uid-%d", i), 10, change.OpCreate))
	}
	write(t, s, batch(10, creates...))
	var wg sync.WaitGroup
	errs := make(chan error, 2*keys)
	for i := range keys {
		for _, rv := range []change.RV{20, 21} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := batch(rv, inferredDelete(fmt.Sprintf("k-%d", i), fmt.Sprintf("uid-%d", i), rv))
				b.Checkpoint = 0 // a relist's batch before its last: no checkpoint
				errs <- s.Write(testCtx(t), b)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE op = 'delete'`); n != keys {
		t.Errorf("%d delete rows for %d objects deleted once", n, keys)
	}
}

func TestARecreatedObjectRevivesItsRow(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(0, cm("a", "uid-1", 10, change.OpCreate), cm("a", "uid-1", 11, change.OpDelete)))
	first := mustObject(t, dsn, "a")
	if !first.Deleted {
		t.Fatalf("row a not deleted: %+v", first)
	}
	// created_at is the transaction's now(): wait until the server's clock is past the
	// first one, so a reset created_at is visibly later.
	clock := connect(t, dsn)
	eventually(t, 10*time.Second, "the server clock passes the first created_at", func() bool {
		var later bool
		if err := clock.QueryRow(testCtx(t), `SELECT now() > $1`, first.CreatedAt).Scan(&later); err != nil {
			t.Fatal(err)
		}
		return later
	})
	write(t, s, batch(0, cm("a", "uid-2", 12, change.OpCreate)))
	a := mustObject(t, dsn, "a")
	if a.Deleted || a.Inferred || a.UID != "uid-2" || a.RV != 12 || a.DataRV != "12" {
		t.Errorf("re-created row = %+v, want live with uid-2 at RV 12", a)
	}
	if !a.CreatedAt.After(first.CreatedAt) {
		t.Errorf("created_at %v not reset (was %v)", a.CreatedAt, first.CreatedAt)
	}
	// An update of the same uid keeps created_at.
	write(t, s, batch(0, cm("a", "uid-2", 13, change.OpUpdate)))
	if b := mustObject(t, dsn, "a"); !b.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("created_at moved on an update: %v, was %v", b.CreatedAt, a.CreatedAt)
	}
	// An inferred delete revived by a later create works too.
	write(t, s, batch(0, inferredDelete("a", "uid-2", 20), cm("a", "uid-3", 21, change.OpCreate)))
	if c := mustObject(t, dsn, "a"); c.Deleted || c.Inferred || c.UID != "uid-3" {
		t.Errorf("row after inferred delete and re-create = %+v", c)
	}
}

func TestHardDeleteRemovesTheRow(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	dsnHard := dsn
	hard, _ := newSink(t, Options{DSN: dsnHard, Migrate: true, HardDelete: true})
	write(t, s, batch(0, cm("a", "uid-a", 10, change.OpCreate), cm("b", "uid-b", 11, change.OpCreate)))

	write(t, hard, batch(20, cm("a", "uid-a", 20, change.OpDelete), inferredDelete("b", "uid-b", 21),
		cm("c", "uid-c", 22, change.OpCreate), cm("c", "uid-c", 23, change.OpDelete)))
	for _, name := range []string{"a", "b", "c"} {
		if r, ok := readObject(t, dsn, name); ok {
			t.Errorf("row %s survives a hard delete: %+v", name, r)
		}
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE op = 'delete'`); n != 3 {
		t.Errorf("delete changes rows = %d, want 3: hard delete still keeps the audit trail", n)
	}
	// The RV guard holds: an older delete removes nothing newer.
	write(t, hard, batch(0, cm("d", "uid-d", 40, change.OpCreate)))
	write(t, hard, batch(0, cm("d", "uid-d", 30, change.OpDelete)))
	if d, ok := readObject(t, dsn, "d"); !ok || d.RV != 40 {
		t.Errorf("row d after an older hard delete: %+v, present %v; want RV 40", d, ok)
	}
}

func TestSeveralChangesOfOneKeyInABatchEndWithTheLatest(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	var changes []change.Change
	for rv := change.RV(100); rv < 150; rv++ {
		changes = append(changes, cm("a", "uid-a", rv, change.OpUpdate))
	}
	changes = append(changes,
		cm("b", "uid-b1", 150, change.OpCreate), cm("b", "uid-b1", 151, change.OpDelete), cm("b", "uid-b2", 152, change.OpCreate),
		cm("c", "uid-c", 153, change.OpCreate), cm("c", "uid-c", 154, change.OpDelete))
	write(t, s, batch(154, changes...))

	if a := mustObject(t, dsn, "a"); a.RV != 149 || a.DataRV != "149" {
		t.Errorf("row a = %+v, want RV 149", a)
	}
	if b := mustObject(t, dsn, "b"); b.Deleted || b.UID != "uid-b2" || b.RV != 152 {
		t.Errorf("row b = %+v, want live uid-b2 at RV 152", b)
	}
	if c := mustObject(t, dsn, "c"); !c.Deleted || c.RV != 154 {
		t.Errorf("row c = %+v, want deleted at RV 154", c)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != len(changes) {
		t.Errorf("changes rows = %d, want %d", n, len(changes))
	}
}

func TestKeyIndexReturnsExactlyTheLiveKeys(t *testing.T) {
	t.Parallel()
	s, _ := newSink(t, Options{})
	nodes := change.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}
	node := cm("node-1", "uid-n", 5, change.OpCreate)
	node.Key.Namespace, node.Resource = "", nodes
	write(t, s, change.Batch{Resource: nodes, Changes: []change.Change{node}})
	write(t, s, batch(0, cm("a", "uid-a", 10, change.OpCreate), cm("b", "uid-b", 11, change.OpCreate),
		cm("c", "uid-c", 12, change.OpCreate), cm("b", "uid-b", 13, change.OpDelete), inferredDelete("c", "uid-c", 14),
		cm("d", "uid-d", 15, change.OpCreate), cm("d", "uid-d", 16, change.OpUpdate)))

	got := map[string]change.Entry{}
	err := s.KeyIndex(testCtx(t), configmaps, func(k change.Key, e change.Entry) error {
		got[k.String()] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]change.Entry{"ns/a": {UID: "uid-a", RV: 10}, "ns/d": {UID: "uid-d", RV: 16}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("KeyIndex(configmaps) = %v, want %v", got, want)
	}
	var nodeKeys []change.Key
	if err := s.KeyIndex(testCtx(t), nodes, func(k change.Key, e change.Entry) error {
		nodeKeys = append(nodeKeys, k)
		return nil
	}); err != nil || len(nodeKeys) != 1 || nodeKeys[0] != (change.Key{Name: "node-1"}) {
		t.Errorf("KeyIndex(nodes) = %v, %v; want [node-1]", nodeKeys, err)
	}
	// An error from fn stops the scan and comes back as is.
	stop := errors.New("stop")
	calls := 0
	if err := s.KeyIndex(testCtx(t), configmaps, func(change.Key, change.Entry) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("KeyIndex with a failing fn: err %v after %d calls", err, calls)
	}
}

// blockWrites holds an exclusive lock on objects until the connection dies (or unblock
// is called), and returns waitBlocked, which returns once a Write started after it waits
// for that lock.
func blockWrites(t *testing.T, dsn string) (waitBlocked, unblock func()) {
	t.Helper()
	blocker := connect(t, dsn)
	if _, err := blocker.Exec(testCtx(t), "BEGIN; LOCK TABLE kube_cdc.objects IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	unblock = func() { blocker.Close(testCtx(t)) } // also when it was terminated
	return func() {
		watcher := connect(t, dsn)
		defer watcher.Close(context.Background())
		eventually(t, 30*time.Second, "the Write waits for the lock", func() bool {
			var waiting int
			// A client's statement, not an autovacuum worker that queued for the lock too
			// (it would let the test cut a Write that had not reached the lock yet).
			err := watcher.QueryRow(testCtx(t), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND backend_type = 'client backend'`).Scan(&waiting)
			if err != nil {
				t.Fatal(err)
			}
			return waiting > 0
		})
	}, unblock
}

// eventually polls cond until it holds, failing the test when it does not within timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

// writeUntilDone retries a Write as the pipeline does, failing on a terminal error.
func writeUntilDone(t *testing.T, s *Sink, b change.Batch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := retry.Do(ctx, retry.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, testLog(t), "write", func(ctx context.Context) error {
		return s.Write(ctx, b)
	})
	if err != nil {
		t.Fatalf("retried Write: %v (terminal %v)", err, retry.IsTerminal(err))
	}
}

func bigBatch(n int, checkpoint change.RV) change.Batch {
	var changes []change.Change
	for i := range n {
		changes = append(changes, cm(fmt.Sprintf("cm-%05d", i), fmt.Sprintf("uid-%d", i), change.RV(1000+i), change.OpCreate))
	}
	return batch(checkpoint, changes...)
}

func assertBatchLanded(t *testing.T, s *Sink, dsn string, b change.Batch) {
	t.Helper()
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects WHERE deleted_at IS NULL`); n != len(b.Changes) {
		t.Errorf("live objects = %d, want %d", n, len(b.Changes))
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != len(b.Changes) {
		t.Errorf("changes rows = %d, want %d", n, len(b.Changes))
	}
	if rv := checkpoint(t, s, configmaps); rv != b.Checkpoint {
		t.Errorf("checkpoint = %d, want %d", rv, b.Checkpoint)
	}
}

func TestAWriteCutOffByTerminatedBackendsIsRetryableAndLosesNothing(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	write(t, s, batch(5, cm("before", "uid-0", 5, change.OpCreate)))
	b := bigBatch(500, 2000)
	b.Changes = append(b.Changes, cm("before", "uid-0", 6, change.OpUpdate))

	waitBlocked, _ := blockWrites(t, dsn)
	errc := make(chan error, 1)
	go func() { errc <- s.Write(context.Background(), b) }()
	waitBlocked()
	db := strings.TrimPrefix(mustURL(t, dsn).Path, "/")
	if err := pg.TerminateBackends(testCtx(t), db); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if err == nil {
		t.Fatal("a Write whose connection was terminated succeeded")
	}
	if retry.IsTerminal(err) {
		t.Fatalf("a terminated connection gave a terminal error: %v", err)
	}
	t.Logf("Write after TerminateBackends: %v", err)
	// Nothing of the failed transaction is visible.
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 1 {
		t.Fatalf("changes rows after the failed Write = %d, want 1", n)
	}
	writeUntilDone(t, s, b)
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.objects`); n != 501 {
		t.Errorf("objects rows = %d, want 501", n)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes`); n != 502 {
		t.Errorf("changes rows = %d, want 502", n)
	}
	if r := mustObject(t, dsn, "before"); r.RV != 6 {
		t.Errorf("row before = %+v, want RV 6", r)
	}
	if rv := checkpoint(t, s, configmaps); rv != 2000 {
		t.Errorf("checkpoint = %d, want 2000", rv)
	}
}

func TestAWriteAcrossAServerRestartIsRetryableAndLosesNothing(t *testing.T) {
	// Restarting would disturb the shared server (or be impossible for an external one).
	t.Setenv(testenv.PostgresDSNEnv, "")
	own := testenv.NewPostgres(t)
	dsn := own.NewDatabase(t)
	s, _ := newSink(t, Options{DSN: dsn, Migrate: true})
	b := bigBatch(300, 1500)

	waitBlocked, _ := blockWrites(t, dsn)
	errc := make(chan error, 1)
	go func() { errc <- s.Write(context.Background(), b) }()
	waitBlocked()
	if err := own.Restart(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if err == nil || retry.IsTerminal(err) {
		t.Fatalf("Write across a restart: err %v (terminal %v), want a retryable error", err, retry.IsTerminal(err))
	}
	t.Logf("Write across a restart: %v", err)
	writeUntilDone(t, s, b)
	assertBatchLanded(t, s, dsn, b)
	// The pool recovered: the next Write needs no retry.
	write(t, s, batch(1600, cm("after", "uid-after", 1600, change.OpCreate)))
}

func mustURL(t *testing.T, dsn string) *url.URL {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("test DSN is not a URL")
	}
	return u
}

func TestNewWithAWrongPasswordFailsFastWithATerminalError(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	u := mustURL(t, dsn)
	realPassword, _ := u.User.Password()
	const wrong = "Wr0ngPassw0rd-s3cret"
	u.User = url.UserPassword(u.User.Username(), wrong)

	start := time.Now()
	s, err := New(testCtx(t), "warehouse", cluster, Options{DSN: u.String(), Migrate: true}, testLog(t))
	if err == nil {
		s.Close()
		t.Fatal("New with a wrong password succeeded")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("New took %v to fail", took)
	}
	if !retry.IsTerminal(err) {
		t.Errorf("error is not terminal: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "credentials") || !strings.Contains(msg, "28P01") || strings.Contains(msg, "\n") {
		t.Errorf("message %q should be one line naming the cause (credentials, 28P01)", msg)
	}
	if strings.Contains(msg, wrong) || strings.Contains(msg, realPassword) {
		t.Errorf("message %q contains a password", msg)
	}
	if _, err := schema.Migrate(testCtx(t), u.String(), "kube_cdc"); !retry.IsTerminal(err) || strings.Contains(err.Error(), wrong) {
		t.Errorf("Migrate with a wrong password: %v", err)
	}
}

func TestNewNamesAnUnknownDatabaseAndAMissingPrivilegeAsTerminal(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	u := mustURL(t, dsn)
	u.Path = "/no_such_database_here"
	_, err := New(testCtx(t), "warehouse", cluster, Options{DSN: u.String(), Migrate: true}, testLog(t))
	if !retry.IsTerminal(err) || !strings.Contains(err.Error(), "database does not exist") {
		t.Errorf("unknown database: %v (terminal %v)", err, retry.IsTerminal(err))
	}

	// A role that may log in but not use the schema.
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	role := "reader_" + randomSuffix()
	admin := connect(t, dsn)
	if _, err := admin.Exec(testCtx(t), fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw-of-reader'`, role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pg.AdminDSN())
		if err == nil {
			defer c.Close(context.Background())
			pg.TerminateBackends(context.Background(), strings.TrimPrefix(mustURL(t, dsn).Path, "/"))
			c.Exec(context.Background(), "DROP OWNED BY "+role)
			c.Exec(context.Background(), "DROP ROLE "+role)
		}
	})
	restricted := mustURL(t, dsn)
	restricted.User = url.UserPassword(role, "pw-of-reader")
	_, err = New(testCtx(t), "warehouse", cluster, Options{DSN: restricted.String(), Migrate: false}, testLog(t))
	if !retry.IsTerminal(err) || !strings.Contains(err.Error(), "privilege") || !strings.Contains(err.Error(), "42501") {
		t.Errorf("missing privilege: %v (terminal %v)", err, retry.IsTerminal(err))
	}
	if strings.Contains(err.Error(), "pw-of-reader") {
		t.Errorf("message %q contains the password", err)
	}
}

func TestNewWithoutMigrateSaysToMigrateWhenTheTablesAreMissing(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	_, err := New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: false}, testLog(t))
	if !retry.IsTerminal(err) || !strings.Contains(err.Error(), "kube-cdc migrate") {
		t.Errorf("New on an empty database without migrate: %v (terminal %v)", err, retry.IsTerminal(err))
	}
}

func TestNewAgainstNoServerIsRetryable(t *testing.T) {
	t.Parallel()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://u:secret-pw@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2", port)
	_, err = New(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Migrate: true}, testLog(t))
	if err == nil || retry.IsTerminal(err) || strings.Contains(err.Error(), "secret-pw") {
		t.Errorf("New with nothing listening: %v (terminal %v), want a retryable error without the password", err, retry.IsTerminal(err))
	}
}

func TestMigrateTwiceIsANoOpTheSecondTime(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	// Two replicas starting together: the advisory lock lets one apply everything.
	var (
		wg      sync.WaitGroup
		results [2][]string
		errs    [2]error
	)
	for i := range 2 {
		wg.Go(func() { results[i], errs[i] = schema.Migrate(testCtx(t), dsn, "kube_cdc") })
	}
	wg.Wait()
	all := migrations.Versions()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent Migrate: %v, %v", errs[0], errs[1])
	}
	if got := append(slices.Clone(results[0]), results[1]...); !slices.Equal(got, all) {
		t.Errorf("concurrent Migrate applied %v and %v, want %v once in all", results[0], results[1], all)
	}
	again, err := schema.Migrate(testCtx(t), dsn, "kube_cdc")
	if err != nil || len(again) != 0 {
		t.Errorf("second Migrate applied %v, %v; want nothing", again, err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.schema_migrations`); n != len(all) {
		t.Errorf("schema_migrations rows = %d, want %d", n, len(all))
	}
	// A second schema in the same database is independent.
	other, err := schema.Migrate(testCtx(t), dsn, "other_cdc")
	if err != nil || !slices.Equal(other, all) {
		t.Errorf("Migrate of schema other_cdc applied %v, %v", other, err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'other_cdc' AND table_name IN ('objects', 'changes', 'checkpoints', 'pods')`); n != 4 {
		t.Errorf("other_cdc has %d of objects, changes, checkpoints, pods", n)
	}
}

func TestTheContractColumnsExist(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"objects":     "cluster,api_group,api_version,resource,kind,namespace,name,uid,resource_version,labels,object,changed_by,created_at,updated_at,deleted_at,delete_inferred,delete_reason,epoch,object_xmin,object_hash,in_changes",
		"changes":     "id,cluster,api_group,resource,namespace,name,uid,resource_version,op,inferred,snapshot,object,changed_by,observed_at,reason,epoch,changed",
		"checkpoints": "cluster,sink,api_group,resource,scope,resource_version,updated_at,epoch,cluster_uid",
		"epochs":      "cluster,sink,api_group,resource,scope,epoch,reason,checkpoint_rv,list_rv,namespace,name,held_rv,detected_at,began_after",
		"quarantine": "cluster,api_group,api_version,resource,kind,namespace,name,uid,resource_version,op,inferred,snapshot," +
			"changed_by,observed_at,reason,sqlstate,raw,quarantined_at,resolved_at,resolved_rv,epoch",
	}
	for table, cols := range want {
		rows, err := connect(t, dsn).Query(testCtx(t), `SELECT column_name::text FROM information_schema.columns
			WHERE table_schema = 'kube_cdc' AND table_name = $1 ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || strings.Join(got, ",") != cols {
			t.Errorf("%s columns = %v (%v), want %s", table, got, err, cols)
		}
	}
	var rvType string
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT data_type FROM information_schema.columns
		WHERE table_schema = 'kube_cdc' AND table_name = 'objects' AND column_name = 'resource_version'`).Scan(&rvType); err != nil || rvType != "bigint" {
		t.Errorf("objects.resource_version is %q (%v), want bigint", rvType, err)
	}
}

func TestStatusReportsCheckpointsAndObjectCounts(t *testing.T) {
	t.Parallel()
	s, _ := newSink(t, Options{})
	write(t, s, batch(50, cm("a", "uid-a", 10, change.OpCreate), cm("b", "uid-b", 11, change.OpCreate),
		cm("c", "uid-c", 12, change.OpCreate), cm("c", "uid-c", 13, change.OpDelete)))
	scoped := configmaps
	scoped.Scope = "ns=team-a"
	write(t, s, change.Batch{Resource: scoped, Checkpoint: 40})

	st, err := readerOf(t, s).Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 {
		t.Fatalf("Status = %+v, want 2 lines", st)
	}
	for i, want := range []struct {
		scope string
		rv    change.RV
	}{{"", 50}, {"ns=team-a", 40}} {
		got := st[i]
		if got.Sink != "warehouse" || got.Group != "" || got.Resource != "configmaps" || got.Scope != want.scope ||
			got.Checkpoint != want.rv || got.Live != 2 || got.Deleted != 1 || time.Since(got.UpdatedAt) > time.Minute {
			t.Errorf("Status[%d] = %+v, want scope %q checkpoint %d, 2 live, 1 deleted", i, got, want.scope, want.rv)
		}
	}
}

func TestRetentionDeletesOldChangesButNoObjects(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	old := cm("old", "uid-old", 10, change.OpCreate)
	old.ObservedAt = time.Now().Add(-48 * time.Hour)
	write(t, s, batch(11, old, cm("new", "uid-new", 11, change.OpCreate)))

	retained, _ := newSink(t, Options{DSN: dsn, Migrate: true, Retention: 24 * time.Hour})
	write(t, retained, batch(12, cm("new", "uid-new", 12, change.OpUpdate)))
	conn := connect(t, dsn)
	eventually(t, 30*time.Second, "retention deletes the old changes row", func() bool {
		var n int
		if err := conn.QueryRow(testCtx(t), `SELECT count(*) FROM kube_cdc.changes WHERE name = 'old'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if got, want := changesRows(t, dsn), []string{"new@11:create", "new@12:update"}; !slices.Equal(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
	if _, ok := readObject(t, dsn, "old"); !ok {
		t.Error("retention deleted an objects row")
	}
}

func TestTwentyThousandChangesWriteInOneBatch(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{})
	pad := strings.Repeat("x", 1000) // ~1.3 KB objects, as in docs/contract.md "Performance notes"
	b := bigBatch(20000, 30000)
	for i := range b.Changes {
		b.Changes[i].Object = json.RawMessage(strings.Replace(string(b.Changes[i].Object), `"data":{`, `"data":{"pad":"`+pad+`",`, 1))
	}
	start := time.Now()
	write(t, s, b)
	first := time.Since(start)
	assertBatchLanded(t, s, dsn, b)
	start = time.Now()
	write(t, s, b)
	replay := time.Since(start)
	assertBatchLanded(t, s, dsn, b)
	t.Logf("Write of %d changes: %v; replay of the same batch: %v", len(b.Changes), first, replay)
}

func randomSuffix() string {
	return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
}

// A failure in the last statement of a batch must undo the first ones, for the pipelined
// small-batch path (one implicit transaction) and the COPY path (an explicit one) alike.
func TestABatchThatFailsPartWayLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, smallBatch + 10} {
		t.Run(fmt.Sprintf("%d changes", n), func(t *testing.T) {
			s, dsn := newSink(t, Options{})
			conn := connect(t, dsn)
			if _, err := conn.Exec(testCtx(t), `
				CREATE FUNCTION kube_cdc.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
				CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON kube_cdc.checkpoints FOR EACH ROW EXECUTE FUNCTION kube_cdc.refuse()`); err != nil {
				t.Fatal(err)
			}
			var changes []change.Change
			for i := range n {
				changes = append(changes, cm(fmt.Sprintf("cm-%d", i), "u", change.RV(10+i), change.OpCreate))
			}
			if err := s.Write(testCtx(t), batch(100, changes...)); err == nil {
				t.Fatal("Write succeeded although the checkpoint insert raises")
			}
			for _, table := range []string{"objects", "changes", "checkpoints"} {
				if got := count(t, dsn, "SELECT count(*) FROM kube_cdc."+table); got != 0 {
					t.Errorf("%d rows in %s after a failed batch, want 0", got, table)
				}
			}
			if _, err := conn.Exec(testCtx(t), `DROP TRIGGER refuse ON kube_cdc.checkpoints`); err != nil {
				t.Fatal(err)
			}
			write(t, s, batch(100, changes...))
			if got := count(t, dsn, "SELECT count(*) FROM kube_cdc.objects"); got != n {
				t.Errorf("%d objects after the retried batch, want %d", got, n)
			}
		})
	}
}
