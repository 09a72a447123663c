package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/change"
	readstore "github.com/kube-cdc/kube-cdc/internal/read/store"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/auditstore"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// actorsDB is a migrated database with an audit store (auditstore.Store) and a connection to write changes
// rows as the sink would (the view reads only what is in the tables).
func actorsDB(t *testing.T) (*auditstore.Store, *pgx.Conn) {
	t.Helper()
	ctx := testCtx(t)
	dsn := pg.NewDatabase(t)
	store, err := NewAuditStore(ctx, cluster, Options{DSN: dsn, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return store, conn
}

type row struct {
	name, uid string
	rv        int64
	op        string
	at        time.Time
	object    string // "" for {"metadata":{}}
}

func insertChanges(t *testing.T, conn *pgx.Conn, rows ...row) []int64 {
	t.Helper()
	var ids []int64
	for _, r := range rows {
		obj := r.object
		if obj == "" {
			obj = `{"metadata":{}}`
		}
		var id int64
		if err := conn.QueryRow(testCtx(t), `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid,
			resource_version, op, object, observed_at) VALUES ($1, '', 'configmaps', 'ns', $2, $3, $4, $5, $6, $7) RETURNING id`,
			cluster, r.name, r.uid, r.rv, r.op, obj, r.at).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

type actorRow struct {
	username, match, auditID string
	distance                 *time.Duration
}

func actorsOf(t *testing.T, conn *pgx.Conn, ids []int64) []actorRow {
	t.Helper()
	out := make([]actorRow, len(ids))
	for i, id := range ids {
		var secs *float64
		err := conn.QueryRow(testCtx(t), `SELECT username, match, audit_id, extract(epoch FROM distance)::float8
			FROM kube_cdc.change_actors WHERE change_id = $1`, id).Scan(&out[i].username, &out[i].match, &out[i].auditID, &secs)
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if secs != nil {
			d := time.Duration(*secs * float64(time.Second))
			out[i].distance = &d
		}
	}
	return out
}

func ev(id, verb, name, user string, at time.Time) audit.Event {
	return audit.Event{AuditID: id, Verb: verb, Resource: "configmaps", Namespace: "ns", Name: name, Username: user,
		Code: 200, RequestReceived: at.Add(-2 * time.Millisecond), StageTimestamp: at}
}

func withRV(e audit.Event, rv uint64, uid string) audit.Event {
	e.ResponseRV, e.ResponseUID = rv, uid
	return e
}

func check(t *testing.T, what string, got []actorRow, want ...string) {
	t.Helper()
	for i, w := range want {
		g := got[i].username
		if g != "" {
			g += " " + got[i].match
		}
		if g != w {
			t.Errorf("%s: change %d's actor is %q, want %q", what, i+1, g, w)
		}
	}
}

func TestChangeActorsJoinsExactlyByKeyAndResponseRVAndAPatchThatChangedNothingAttachesToNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-time.Minute).UTC()
	// Two users write within the same second, then a third patches to the same content:
	// the apiserver answers the patch with the RV it found.
	ids := insertChanges(t, conn,
		row{"c", "u1", 10, "create", t0, ""},
		row{"c", "u1", 11, "update", t0.Add(300 * time.Millisecond), ""},
		row{"c", "u1", 12, "update", t0.Add(600 * time.Millisecond), ""},
	)
	events := []audit.Event{
		withRV(ev("a", "create", "c", "dev-a", t0), 10, "u1"),
		withRV(ev("b", "update", "c", "dev-b", t0.Add(290*time.Millisecond)), 11, "u1"),
		withRV(ev("c", "update", "c", "dev-c", t0.Add(590*time.Millisecond)), 12, "u1"),
		withRV(ev("noop", "patch", "c", "dev-noop", t0.Add(900*time.Millisecond)), 12, "u1"),
	}
	// Stored twice (the apiserver re-sent the batch): harmless.
	for range 2 {
		if err := store.Store(ctx, events); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "exact", actorsOf(t, conn, ids), "dev-a exact", "dev-b exact", "dev-c exact")
	st, err := store.JoinStats(ctx, t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 4 || st.Changes != 3 || st.Exact != 3 || st.UnmatchedChanges != 0 || st.UnmatchedEvents != 1 {
		t.Errorf("join stats %+v; want 4 events, 3 changes all exact, the no-op patch the one unmatched event", st)
	}
}

func TestChangeActorsJoinsDeletesByUIDAndAGracefulDeletesUpdateToItsDelete(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-time.Minute).UTC()
	ids := insertChanges(t, conn,
		// A ConfigMap DELETE answers a Status naming the uid only.
		row{"status-only", "u1", 20, "delete", t0, ""},
		// A graceful delete: an update setting deletionTimestamp, then the delete whose RV
		// the DELETE's response carries.
		row{"graceful", "u2", 30, "update", t0, `{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}}`},
		row{"graceful", "u2", 31, "delete", t0.Add(5 * time.Millisecond), ""},
		// A deletecollection lists the uids it deleted.
		row{"listed", "u3", 40, "delete", t0, ""},
		// A Status naming another uid (a recreated object's) explains nothing.
		row{"other-uid", "u4", 50, "delete", t0, ""},
	)
	dc := ev("dc", "deletecollection", "", "dev-c", t0)
	dc.DeletedUIDs = []string{"u9", "u3"}
	if err := store.Store(ctx, []audit.Event{
		withRV(ev("s", "delete", "status-only", "dev-a", t0), 0, "u1"),
		withRV(ev("g", "delete", "graceful", "dev-b", t0), 31, "u2"),
		dc,
		withRV(ev("o", "delete", "other-uid", "dev-a", t0), 0, "u5"),
	}); err != nil {
		t.Fatal(err)
	}
	got := actorsOf(t, conn, ids)
	check(t, "deletes", got, "dev-a exact", "dev-b nearest", "dev-b exact", "dev-c exact", "")
}

func TestChangeActorsNearestIsByKeyVerbAndTimeAndNeverAcrossUIDs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-time.Minute).UTC()
	// Level Metadata: no response RV. The object is created (its event lost), deleted and
	// created again under the same name by other users, then updated by someone whose
	// request named the first uid after the second was created, and by someone else.
	ids := insertChanges(t, conn,
		row{"r", "u1", 10, "create", t0, ""},
		row{"r", "u1", 11, "delete", t0.Add(time.Second), ""},
		row{"r", "u2", 12, "create", t0.Add(1100 * time.Millisecond), ""},
		row{"r", "u2", 13, "update", t0.Add(3 * time.Second), ""},
	)
	stale := ev("stale", "update", "r", "dev-stale", t0.Add(2990*time.Millisecond))
	stale.ObjectUID = "u1"
	if err := store.Store(ctx, []audit.Event{
		ev("d1", "delete", "r", "dev-b", t0.Add(990*time.Millisecond)),
		// dev-c's create (of u2) is the only create event: within a minute of u1's create,
		// but u1's delete lies between them.
		ev("c2", "create", "r", "dev-c", t0.Add(1050*time.Millisecond)),
		stale,
		ev("u", "update", "r", "dev-d", t0.Add(2500*time.Millisecond)),
	}); err != nil {
		t.Fatal(err)
	}
	got := actorsOf(t, conn, ids)
	check(t, "nearest", got, "", "dev-b nearest", "dev-c nearest", "dev-d nearest")
	if d := got[1].distance; d == nil || *d != 10*time.Millisecond {
		t.Errorf("the delete's distance is %v, want 10ms", d)
	}
}

// A burst of writes that kube-cdc observed 500 ms after the apiserver answered them,
// all at once: each change still gets the write that made it. A create is made by a
// create even where the next write lies nearer its observation (CI saw the update's user
// on a create), and never by a write of another uid.
func TestChangeActorsNearestHoldsWhenKubeCDCObservedABurstLate(t *testing.T) {
	t.Parallel()
	type write struct {
		id, verb, user string
		after          time.Duration // after the burst's first write
	}
	type version struct {
		uid  string
		rv   int64
		op   string
		want string
	}
	for _, tc := range []struct {
		name     string
		writes   []write
		versions []version
	}{
		{"created, deleted and created again within 30 ms",
			[]write{{"c1", "create", "dev-a", 0}, {"d1", "delete", "dev-c", 10 * time.Millisecond}, {"c2", "create", "dev-b", 30 * time.Millisecond}},
			[]version{{"u1", 10, "create", "dev-a nearest"}, {"u1", 11, "delete", "dev-c nearest"}, {"u2", 12, "create", "dev-b nearest"}}},
		{"created, then updated 10 ms later",
			[]write{{"c1", "create", "dev-a", 0}, {"u1", "update", "dev-b", 10 * time.Millisecond}},
			[]version{{"u1", 10, "create", "dev-a nearest"}, {"u1", 11, "update", "dev-b nearest"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			store, conn := actorsDB(t)
			t0 := time.Now().Add(-time.Minute).UTC()
			late := t0.Add(500 * time.Millisecond)
			var rows []row
			var want []string
			for i, v := range tc.versions {
				rows = append(rows, row{"b", v.uid, v.rv, v.op, late.Add(time.Duration(i) * time.Millisecond), ""})
				want = append(want, v.want)
			}
			ids := insertChanges(t, conn, rows...)
			var events []audit.Event
			for _, w := range tc.writes {
				events = append(events, ev(w.id, w.verb, "b", w.user, t0.Add(w.after)))
			}
			if err := store.Store(ctx, events); err != nil {
				t.Fatal(err)
			}
			check(t, "late", actorsOf(t, conn, ids), want...)
		})
	}
}

func TestHistoryFunctionCarriesTheActor(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-time.Minute).UTC()
	insertChanges(t, conn, row{"h", "u1", 10, "create", t0, ""})
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version)
		VALUES ($1, 'warehouse', '', 'configmaps', 10)`, cluster); err != nil {
		t.Fatal(err)
	}
	e := withRV(ev("h1", "create", "h", "dev-a@example.com", t0), 10, "u1")
	e.Impersonator, e.UserAgent = "admin", "kubectl/v1.36.5"
	if err := store.Store(ctx, []audit.Event{e}); err != nil {
		t.Fatal(err)
	}
	var user, imp, agent, match string
	if err := conn.QueryRow(ctx, `SELECT username, impersonator, user_agent, match FROM kube_cdc.history('configmaps', 'ns', 'h')`).
		Scan(&user, &imp, &agent, &match); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(user, " ", imp, " ", agent, " ", match); got != "dev-a@example.com admin kubectl/v1.36.5 exact" {
		t.Errorf("history() says %q", got)
	}
}

// history() looks actors up only for the clusters with an audit event of the key; a
// deletecollection's event names no object (name ”), and still makes its delete's actor.
func TestHistoryFunctionNamesTheActorOfADeleteByDeletecollection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-time.Minute).UTC()
	insertChanges(t, conn, row{"g", "u7", 10, "create", t0, ""}, row{"g", "u7", 11, "delete", t0.Add(time.Second), ""})
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version)
		VALUES ($1, 'warehouse', '', 'configmaps', 11)`, cluster); err != nil {
		t.Fatal(err)
	}
	dc := ev("dc", "deletecollection", "", "dev-c", t0.Add(990*time.Millisecond))
	dc.DeletedUIDs = []string{"u7"}
	if err := store.Store(ctx, []audit.Event{dc}); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT op || ' ' || coalesce(username || ' ' || match, '-') FROM kube_cdc.history('configmaps', 'ns', 'g')`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"create -", "delete dev-c exact"}; !slices.Equal(got, want) {
		t.Errorf("history() says %q, want %q", got, want)
	}
}

func TestAuditLogPositionsAreStoredWithTheirEventsPerReader(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	a, b := store.ForReader("node-a"), store.ForReader("node-b")
	t0 := time.Now().UTC()
	if err := a.StoreAt(ctx, []audit.Event{ev("l1", "create", "x", "dev-a", t0)}, "/var/log/audit.log", audit.Position{Inode: 7, Offset: 100}); err != nil {
		t.Fatal(err)
	}
	// The same line again (a reader that stored it, then died before...): harmless.
	if err := a.StoreAt(ctx, []audit.Event{ev("l1", "create", "x", "dev-a", t0)}, "/var/log/audit.log", audit.Position{Inode: 8, Offset: 20}); err != nil {
		t.Fatal(err)
	}
	if err := a.StoreAt(ctx, nil, "/var/log/other.log", audit.Position{Inode: 9, Offset: 5}); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Position(ctx, "/var/log/audit.log"); err != nil || p != (audit.Position{Inode: 8, Offset: 20}) {
		t.Errorf("node-a's position %+v, %v; want inode 8 offset 20", p, err)
	}
	if p, err := b.Position(ctx, "/var/log/audit.log"); err != nil || p != (audit.Position{}) {
		t.Errorf("node-b's position %+v, %v; want none", p, err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.audit_events`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d events stored, %v; want 1", n, err)
	}
}

// sinkWithAudit is a sink and an audit store on one fresh database.
func sinkWithAudit(t *testing.T) (*Sink, *auditstore.Store, string) {
	t.Helper()
	s, dsn := newSink(t, Options{})
	store, err := NewAuditStore(testCtx(t), cluster, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	return s, store, dsn
}

func TestRetentionDeletesTheClustersAuditEventsReceivedBeforeTheCutoffInChunks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, store, dsn := sinkWithAudit(t)
	conn := connect(t, dsn)
	now := time.Now().UTC()
	ids := insertChanges(t, conn,
		row{"old", "u1", 10, "create", now.Add(-2 * time.Hour), ""},
		row{"new", "u2", 20, "create", now, ""},
	)
	if err := store.Store(ctx, []audit.Event{
		withRV(ev("e-old", "create", "old", "dev-a", now.Add(-2*time.Hour)), 10, "u1"),
		withRV(ev("e-margin", "update", "new", "dev-b", now.Add(-time.Hour-30*time.Second)), 19, "u2"),
		withRV(ev("e-new", "create", "new", "dev-c", now), 20, "u2"),
	}); err != nil {
		t.Fatal(err)
	}
	// Received when they were made; more old ones than a chunk, and another cluster's.
	if _, err := conn.Exec(ctx, `UPDATE kube_cdc.audit_events SET received_at = stage_at`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.audit_events (audit_id, cluster, verb, api_group, resource, namespace,
		name, username, code, request_at, stage_at, received_at)
		SELECT 'filler-' || i, CASE WHEN i = 0 THEN 'elsewhere' ELSE $1 END, 'update', '', 'configmaps', 'ns', 'f', 'dev-f', 200,
		       $2::timestamptz, $2::timestamptz, $2::timestamptz
		  FROM generate_series(0, $3::int) i`, cluster, now.Add(-90*time.Minute), schema.RetentionChunk+5); err != nil {
		t.Fatal(err)
	}
	if got := actorsOf(t, conn, ids); got[0].auditID != "e-old" || got[1].auditID != "e-new" {
		t.Fatalf("actors before retention: %+v", got)
	}

	res, err := s.Retain(ctx, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// e-old and the filler of this cluster; not another cluster's, not one within the
	// margin of the cutoff, not a new one.
	if want := int64(schema.RetentionChunk + 6); res.AuditEvents != want {
		t.Errorf("retention deleted %d audit events, want %d", res.AuditEvents, want)
	}
	rows, err := conn.Query(ctx, `SELECT audit_id FROM kube_cdc.audit_events ORDER BY audit_id`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"e-margin", "e-new", "filler-0"}; fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("%d audit events left (%v…), want %v", len(left), left[:min(len(left), 6)], want)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE name = 'old'`); n != 0 {
		t.Errorf("the old change is still there")
	}
	if got := actorsOf(t, conn, ids[1:]); got[0].auditID != "e-new" || got[0].match != "exact" {
		t.Errorf("the new change's actor after retention: %+v, want e-new exact", got[0])
	}
}

// After a time travel an RV is issued again for another change: each change joins the
// event of its own epoch, the new history's one even when it completed before the epoch
// was detected (migration 014).
func TestChangeActorsJoinsWithinTheChangesEpoch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-10 * time.Minute).UTC()
	var ids []int64
	for _, c := range []struct {
		epoch int
		at    time.Time
	}{{0, t0}, {1, t0.Add(2 * time.Minute)}} {
		var id int64
		if err := conn.QueryRow(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid,
			resource_version, op, object, observed_at, epoch) VALUES ($1, '', 'configmaps', 'ns', 'c', 'u1', 10, 'update', '{"metadata":{}}', $2, $3)
			RETURNING id`, cluster, c.at, c.epoch).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if c.epoch == 0 {
			// Found two minutes after the restore, which came a minute after t0.
			if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.epochs (cluster, sink, api_group, resource, scope, epoch, reason,
				checkpoint_rv, list_rv, detected_at) VALUES ($1, 'warehouse', '', 'configmaps', '', 1, 'list-below-checkpoint', 12, 9, $2)`,
				cluster, t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := store.Store(ctx, []audit.Event{
		withRV(ev("old", "update", "c", "dev-old", t0.Add(-time.Millisecond)), 10, "u1"),
		withRV(ev("new", "update", "c", "dev-new", t0.Add(90*time.Second)), 10, "u1"),
	}); err != nil {
		t.Fatal(err)
	}
	check(t, "epochs", actorsOf(t, conn, ids), "dev-old exact", "dev-new exact")
}

// An event whose user, groups or user agent hold a NUL byte or invalid UTF-8 (an OIDC
// claim may) is stored with U+FFFD in their place, and its batch with it: text cannot hold
// them, and a failed batch would fail again at every re-send.
func TestAnEventWithANULByteOrInvalidUTF8IsStoredWithItsBatch(t *testing.T) {
	t.Parallel()
	store, conn := actorsDB(t)
	now := time.Now()
	bad := ev("bad", "update", "cm", "dev\x00a", now)
	bad.Groups = []string{"g\xff"}
	bad.UserAgent = "agent\x00"
	bad.Impersonator = "ops\x00"
	good := ev("good", "update", "cm", "dev-b", now)
	if err := store.Store(testCtx(t), []audit.Event{bad, good}); err != nil {
		t.Fatalf("store: %v", err)
	}
	var users []string
	var agent, impersonator, group string
	if err := conn.QueryRow(testCtx(t), `SELECT array_agg(username ORDER BY audit_id),
			max(user_agent) FILTER (WHERE audit_id = 'bad'), max(impersonator), max(groups[1]) FILTER (WHERE audit_id = 'bad')
		FROM kube_cdc.audit_events`).Scan(&users, &agent, &impersonator, &group); err != nil {
		t.Fatal(err)
	}
	if want := []string{"dev\uFFFDa", "dev-b"}; !slices.Equal(users, want) {
		t.Errorf("usernames %q, want %q", users, want)
	}
	if agent != "agent\uFFFD" || impersonator != "ops\uFFFD" || group != "g\uFFFD" {
		t.Errorf("user agent %q, impersonator %q, group %q: want U+FFFD for the bad bytes", agent, impersonator, group)
	}
}

// `kube-cdc history` (the sink's History) names each version's actor the way the view
// does, looking it up only for a key with an audit event, a deletecollection of its
// namespace included: the delete made by one has its user, a key with no event none.
func TestHistoryReadsEachVersionsActorIncludingADeletecollections(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, store, _ := sinkWithAudit(t)
	write(t, s, batch(10, cm("f", "uid-f", 10, change.OpCreate), cm("q", "uid-q", 10, change.OpCreate), cm("quiet", "uid-quiet", 10, change.OpCreate)))
	write(t, s, batch(11, cm("f", "uid-f", 11, change.OpUpdate), cm("q", "uid-q", 11, change.OpUpdate)))
	write(t, s, batch(12, cm("f", "uid-f", 12, change.OpDelete)))
	at := time.Now().UTC()
	dc := ev("dc", "deletecollection", "", "dev-c", at)
	dc.DeletedUIDs = []string{"uid-f"}
	if err := store.Store(ctx, []audit.Event{withRV(ev("u", "update", "q", "dev-b", at), 11, "uid-q"), dc}); err != nil {
		t.Fatal(err)
	}
	// f's only event is the deletecollection, which names no object.
	for name, want := range map[string][]string{"f": {"create -", "update -", "delete dev-c exact"}, "q": {"create -", "update dev-b exact"}, "quiet": {"create -"}} {
		vs, err := readerOf(t, s).History(ctx, readstore.HistoryQuery{Resource: "configmaps", Namespace: "ns", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vs {
			actor := "-"
			if v.Actor != nil {
				actor = v.Actor.Username + " " + v.Actor.Match
			}
			got = append(got, string(v.Op)+" "+actor)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: history %q, want %q", name, got, want)
		}
	}
}

// The Kafka and stdout sinks name a change's actor through ExactActors as they write it;
// the database through the view change_actors. Both read the one exact rule (the SQL
// function exact_actor), so they name the same actor, within the change's epoch too: an
// event of the old history that answered the same RV is not the new change's actor.
func TestExactActorsNamesWhatTheViewJoinsExactlyWithinTheEpoch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, conn := actorsDB(t)
	t0 := time.Now().Add(-10 * time.Minute).UTC()
	ids := insertChanges(t, conn,
		row{name: "a", uid: "ua", rv: 10, op: "create", at: t0},
		row{name: "b", uid: "ub", rv: 11, op: "update", at: t0},
		row{name: "d", uid: "ud", rv: 12, op: "delete", at: t0})
	// A time travel found two minutes after t0; the new history's change of c at RV 10 again.
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.epochs (cluster, sink, api_group, resource, scope, epoch, reason,
		checkpoint_rv, list_rv, detected_at) VALUES ($1, 'warehouse', '', 'configmaps', '', 1, 'list-below-checkpoint', 12, 9, $2)`,
		cluster, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	var travelled int64
	if err := conn.QueryRow(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid,
		resource_version, op, object, observed_at, epoch) VALUES ($1, '', 'configmaps', 'ns', 'a', 'ua2', 10, 'update', '{"metadata":{}}', $2, 1)
		RETURNING id`, cluster, t0.Add(3*time.Minute)).Scan(&travelled); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, travelled)
	if err := store.Store(ctx, []audit.Event{
		withRV(ev("e-a", "create", "a", "dev-a", t0.Add(-time.Millisecond)), 10, "ua"),
		withRV(ev("e-b", "update", "b", "dev-b", t0.Add(-time.Millisecond)), 11, "ub"),
		withRV(ev("e-d", "delete", "d", "dev-d", t0.Add(-time.Millisecond)), 0, "ud"), // a Status naming the uid
	}); err != nil {
		t.Fatal(err)
	}
	b := change.Batch{Resource: change.Resource{Resource: "configmaps", Version: "v1", Kind: "ConfigMap"}, Changes: []change.Change{
		{Key: change.Key{Namespace: "ns", Name: "a"}, UID: "ua", RV: 10, Op: change.OpCreate},
		{Key: change.Key{Namespace: "ns", Name: "b"}, UID: "ub", RV: 11, Op: change.OpUpdate},
		{Key: change.Key{Namespace: "ns", Name: "d"}, UID: "ud", RV: 12, Op: change.OpDelete},
		{Key: change.Key{Namespace: "ns", Name: "a"}, UID: "ua2", RV: 10, Op: change.OpUpdate, Epoch: 1},
	}}
	found, err := store.ExactActors(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	view := actorsOf(t, conn, ids)
	for i := range b.Changes {
		var got string
		if a := found[i]; a != nil {
			got = a.Username + " " + a.Match
		}
		want := ""
		if view[i].match == change.MatchExact {
			want = view[i].username + " " + view[i].match
		}
		if got != want {
			t.Errorf("change %d: ExactActors names %q, the view joins %q exactly", i+1, got, want)
		}
	}
	check(t, "the view", view, "dev-a exact", "dev-b exact", "dev-d exact", "")
}
