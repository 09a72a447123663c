package postgres

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
)

// monthStart is the first instant (UTC) of the month n months after t's.
func monthStart(t time.Time, n int) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+time.Month(n), 1, 0, 0, 0, 0, time.UTC)
}

func partitionName(t time.Time) string { return "changes_" + t.UTC().Format("2006_01") }

// partitionNames lists the partitions of changes.
func partitionNames(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(testCtx(t), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'kube_cdc.changes'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestTheSinkCreatesTheMonthsAheadAndARowBeyondThemMovesIntoItsMonthLater(t *testing.T) {
	t.Parallel()
	s, dsn := newSink(t, Options{PartitionsAhead: 4}) // migration 012 made three ahead
	now := time.Now()
	var want []string
	for i := range 5 {
		want = append(want, partitionName(monthStart(now, i)))
	}
	want = append(want, "changes_default")
	if got := partitionNames(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("partitions after start = %v, want %v", got, want)
	}
	// A change observed beyond the months ahead (a clock far ahead) is written all the
	// same, into the default partition, and moves into its month when that is created.
	far := cm("far", "uid-far", 10, change.OpCreate)
	far.ObservedAt = monthStart(now, 6).Add(time.Hour)
	write(t, s, batch(10, far))
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes_default`); n != 1 {
		t.Fatalf("changes_default holds %d rows, want the far one", n)
	}
	s2, _ := newSink(t, Options{DSN: dsn, Migrate: true, PartitionsAhead: 7})
	_ = s2
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.`+partitionName(far.ObservedAt)); n != 1 {
		t.Errorf("%s holds %d rows, want the far one moved there", partitionName(far.ObservedAt), n)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes_default`); n != 0 {
		t.Errorf("changes_default still holds %d rows", n)
	}
}

// A replay (the same batch written again after a restart, stamped later: in another
// month's partition) inserts nothing twice on every write path, although changes has no
// UNIQUE key any more.
func TestAReplayInAnotherMonthWritesNothingTwiceOnEveryWritePath(t *testing.T) {
	t.Parallel()
	lastMonth := monthStart(time.Now(), -1).Add(36 * time.Hour) // in changes_default: no partition before this month
	type path struct {
		name string
		opts Options
		make func() []change.Change
	}
	few := func() []change.Change {
		return []change.Change{cm("a", "uid-a", 10, change.OpCreate), cm("a", "uid-a", 11, change.OpUpdate),
			cm("b", "uid-b", 12, change.OpCreate), cm("b", "uid-b", 13, change.OpDelete)}
	}
	snapshots := func() []change.Change {
		cs := few()
		for i := range cs {
			if cs[i].Op != change.OpDelete {
				cs[i].Snapshot, cs[i].ListRV = true, 13
			}
		}
		return cs
	}
	many := func() []change.Change {
		var cs []change.Change
		for i := range smallBatch + 36 {
			cs = append(cs, cm(fmt.Sprintf("cm-%d", i), "u", change.RV(100+i), change.OpCreate))
		}
		return append(cs, cm("cm-0", "u", 1000, change.OpUpdate), cm("cm-1", "u", 1001, change.OpDelete))
	}
	for _, p := range []path{
		{"single statement", Options{}, few},
		{"pipelined small batch with snapshots", Options{}, snapshots},
		{"COPY", Options{}, many},
		{"hard deletes", Options{HardDelete: true}, few},
		{"hard deletes and COPY", Options{HardDelete: true}, many},
	} {
		t.Run(p.name, func(t *testing.T) {
			s, dsn := newSink(t, p.opts)
			first := p.make()
			for i := range first {
				first[i].ObservedAt = lastMonth
			}
			write(t, s, batch(2000, first...))
			want := changesRows(t, dsn)
			// Restarted: a new sink resends the batch from zero, observed now.
			opts := p.opts
			opts.DSN, opts.Migrate = dsn, true
			again, _ := newSink(t, opts)
			write(t, again, batch(0, p.make()...))
			write(t, again, batch(0, p.make()...))
			if got := changesRows(t, dsn); !slices.Equal(got, want) {
				t.Errorf("changes after two replays = %v,\nwant %v", got, want)
			}
		})
	}
}

// Retention across three partition boundaries: the months entirely older than the
// cutoff are dropped (unless another cluster still wants their rows: then only this
// cluster's rows go), the boundary month loses only its rows before the cutoff, and the
// newest month is kept.
func TestRetentionAcrossThreePartitionBoundariesDropsWholeMonthsAndKeepsTheNewest(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	conn := connect(t, dsn)
	now := time.Now()
	var months []time.Time // three months back, two, one, this one
	for i := -3; i <= 0; i++ {
		months = append(months, monthStart(now, i))
		if _, err := conn.Exec(ctx, `SELECT kube_cdc.changes_partition_create($1::timestamp)`, monthStart(now, i).Format("2006-01-02")); err != nil {
			t.Fatal(err)
		}
	}
	// Two rows a month, on day 3 and day 20, of this cluster; the oldest month also
	// holds a row of a cluster that keeps its history forever, the next one a row of a
	// cluster whose retention has passed it.
	rv := change.RV(1)
	for _, m := range months {
		for _, day := range []int{2, 19} {
			c := cm(fmt.Sprintf("%s-%d", m.Format("2006-01"), day+1), "u", rv, change.OpCreate)
			c.ObservedAt = m.AddDate(0, 0, day)
			write(t, s, batch(rv, c))
			rv++
		}
	}
	for _, o := range []struct {
		cluster string
		keep    any
		at      time.Time
	}{{"forever", nil, months[0].Add(time.Hour)}, {"brief", "1 hour", months[1].Add(time.Hour)}} {
		if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.retention (cluster, keep) VALUES ($1, $2)`, o.cluster, o.keep); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, observed_at)
			VALUES ($1, '', 'configmaps', 'ns', 'other', 'u', 1, 'create', $2)`, o.cluster, o.at); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := months[2].AddDate(0, 0, 10) // inside last month
	res, err := s.Retain(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{partitionName(months[1])}; !slices.Equal(res.Dropped, want) {
		t.Errorf("dropped %v, want %v (the oldest month holds a row of a cluster that keeps everything)", res.Dropped, want)
	}
	if res.Deleted != 3 {
		t.Errorf("deleted %d rows one by one, want 3: this cluster's two in the oldest month, one in the boundary month", res.Deleted)
	}
	wantParts := []string{partitionName(months[0]), partitionName(months[2]), partitionName(months[3])}
	wantParts = append(wantParts, partitionName(monthStart(now, 1)), partitionName(monthStart(now, 2)), partitionName(monthStart(now, 3)), "changes_default")
	slices.Sort(wantParts)
	if got := partitionNames(t, dsn); !slices.Equal(got, wantParts) {
		t.Errorf("partitions after retention = %v, want %v", got, wantParts)
	}
	rows, err := conn.Query(ctx, `SELECT cluster || ':' || name FROM kube_cdc.changes ORDER BY observed_at`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"forever:other", "test:" + months[2].Format("2006-01") + "-20", "test:" + months[3].Format("2006-01") + "-3",
		"test:" + months[3].Format("2006-01") + "-20"}
	if !slices.Equal(got, want) {
		t.Errorf("changes after retention = %v, want %v", got, want)
	}
	// The cluster that kept the oldest month gives it up: the next run drops it.
	if _, err := conn.Exec(ctx, `UPDATE kube_cdc.retention SET keep = '1 hour' WHERE cluster = 'forever'`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Retain(ctx, cutoff); err != nil || !slices.Equal(res.Dropped, []string{partitionName(months[0])}) {
		t.Errorf("second retention dropped %v (error %v), want %s", res.Dropped, err, partitionName(months[0]))
	}
}

// Writes go on, without an error, while retention drops old months under them.
func TestWritesContinueWithoutErrorsWhileRetentionDropsPartitions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	conn := connect(t, dsn)
	now := time.Now()
	for i := -6; i < 0; i++ {
		m := monthStart(now, i)
		if _, err := conn.Exec(ctx, `SELECT kube_cdc.changes_partition_create($1::timestamp)`, m.Format("2006-01-02")); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, observed_at)
			SELECT $1, '', 'configmaps', 'old', 'cm-' || g, 'u', g, 'update', jsonb_build_object('pad', repeat('x', 500)),
			       $2::timestamptz + g * interval '1 second'
			  FROM generate_series(1, 3000) g`, cluster, m); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		written atomic.Int64
		errs    = make(chan error, 1)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rv := change.RV(1_000_000); !stop.Load() || written.Load() < 20; rv++ {
			if err := s.Write(ctx, batch(rv, cm(fmt.Sprintf("live-%d", rv%50), "u", rv, change.OpUpdate))); err != nil {
				errs <- err
				return
			}
			written.Add(1)
		}
	}()
	res, err := s.Retain(ctx, monthStart(now, 0))
	stop.Store(true)
	wg.Wait()
	close(errs)
	if err != nil {
		t.Fatalf("Retain: %v", err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("a write failed during retention: %v", err)
	}
	if len(res.Dropped) != 6 {
		t.Errorf("dropped %v, want the 6 old months", res.Dropped)
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = 'ns'`); int64(n) != written.Load() {
		t.Errorf("%d changes rows of the writes during retention, want %d", n, written.Load())
	}
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes_default`); n != 0 {
		t.Errorf("%d rows went to changes_default: this month's partition was lost", n)
	}
	t.Logf("%d writes during the retention of 6 months (18,000 rows)", written.Load())
}

// oldSchema returns a database migrated up to the migration before 012 (unpartitioned
// changes), with rows over four months: n rows, ids with gaps. dsnParams are added to
// the DSN returned.
func oldSchema(t *testing.T, n int, dsnParams string) (dsn string, fingerprint func(t *testing.T) string) {
	t.Helper()
	ctx := testCtx(t)
	dsn = pg.NewDatabase(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA kube_cdc"); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.MigrateConn(ctx, conn, "kube_cdc", "012_partitions"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid,
			resource_version, op, object, observed_at)
		SELECT 'c' || g % 3, '', 'configmaps', 'ns-' || g % 10, 'cm-' || g % 500, 'u', g, 'update',
		       jsonb_build_object('n', g), now() - (g % 120) * interval '1 day'
		  FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM kube_cdc.changes WHERE id % 7 = 0`); err != nil {
		t.Fatal(err)
	}
	fingerprint = func(t *testing.T) string {
		var fp string
		if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT count(*) || ' ' || md5(string_agg(
				id || cluster || name || resource_version || observed_at || object::text, ',' ORDER BY id))
			FROM kube_cdc.changes`).Scan(&fp); err != nil {
			t.Fatal(err)
		}
		return fp
	}
	if dsnParams != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		for kv := range strings.SplitSeq(dsnParams, "&") {
			k, v, _ := strings.Cut(kv, "=")
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		dsn = u.String()
	}
	return dsn, fingerprint
}

// assertMigrated checks that changes is partitioned, holds what fp said before, and
// that new ids continue above the old ones.
func assertMigrated(t *testing.T, dsn, before string, fp func(*testing.T) string) {
	t.Helper()
	if after := fp(t); after != before {
		t.Errorf("changes after the migration: %s, before: %s", after, before)
	}
	var kind string
	if err := connect(t, dsn).QueryRow(testCtx(t), `SELECT relkind::text FROM pg_class WHERE oid = 'kube_cdc.changes'::regclass`).Scan(&kind); err != nil || kind != "p" {
		t.Errorf("changes has relkind %q (%v), want p (partitioned)", kind, err)
	}
	maxID := count(t, dsn, `SELECT max(id) FROM kube_cdc.changes`)
	s, _ := newSink(t, Options{DSN: dsn, Migrate: true})
	write(t, s, batch(1, cm("new", "uid-new", 1, change.OpCreate)))
	if id := count(t, dsn, `SELECT id FROM kube_cdc.changes WHERE name = 'new'`); id <= maxID {
		t.Errorf("the first change after the migration has id %d, not above the old ones' %d", id, maxID)
	}
}

func TestMigratingASmallUnpartitionedChangesCopiesEveryRowAndID(t *testing.T) {
	t.Parallel()
	dsn, fp := oldSchema(t, 3000, "")
	before := fp(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	assertMigrated(t, dsn, before, fp)
	// Copied into monthly partitions from the oldest row's month: none in the default.
	if n := count(t, dsn, `SELECT count(*) FROM kube_cdc.changes_default`); n != 0 {
		t.Errorf("changes_default holds %d rows after the copy", n)
	}
}

func TestALargeUnpartitionedChangesIsRefusedThenAttachedOnlineByPartitionChanges(t *testing.T) {
	t.Parallel()
	// A copy limit of 100 rows makes 3,000 "large".
	dsn, fp := oldSchema(t, 3000, "kube_cdc.partition_copy_limit=100")
	before := fp(t)
	_, err := schema.Migrate(testCtx(t), dsn, "kube_cdc")
	if err == nil || !strings.Contains(err.Error(), "--partition-changes") {
		t.Fatalf("Migrate of a large changes: error %v, want one naming --partition-changes", err)
	}
	var steps []schema.PartitionStep
	if _, err := schema.PartitionChanges(testCtx(t), dsn, "kube_cdc", func(st schema.PartitionStep) { steps = append(steps, st) }); err != nil {
		t.Fatalf("PartitionChanges: %v", err)
	}
	for _, st := range steps {
		t.Logf("%s: %v exclusive=%v", st.Name, st.Took, st.Exclusive)
	}
	assertMigrated(t, dsn, before, fp)
	if got := partitionNames(t, dsn); !slices.Contains(got, "changes_legacy") {
		t.Errorf("partitions %v lack changes_legacy", got)
	}
	// Every index of the parent is one of those built concurrently on the old table,
	// attached by the migrations after 012 rather than built again under their lock: an
	// index CREATE INDEX on the parent builds on a partition is named <partition>_…_idx.
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testCtx(t))
	var legacy []string
	if err := conn.QueryRow(testCtx(t), `SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}')
		  FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
		 WHERE x.indrelid = 'kube_cdc.changes_legacy'::regclass`).Scan(&legacy); err != nil {
		t.Fatal(err)
	}
	for _, ix := range legacy {
		if strings.HasSuffix(ix, "_idx") {
			t.Errorf("changes_legacy has index %s, built by a migration under its lock, not beforehand (all: %v)", ix, legacy)
		}
	}
	// Run again: nothing to do.
	if applied, err := schema.PartitionChanges(testCtx(t), dsn, "kube_cdc", nil); err != nil || len(applied) != 0 {
		t.Errorf("PartitionChanges again: applied %v, error %v; want nothing", applied, err)
	}
}

// A role that owns nothing (it may not create or drop partitions) still writes, and its
// retention still deletes its rows: through the parent, with the privileges check asks
// for.
func TestARoleThatOwnsNoPartitionWritesAndItsRetentionDeletesRowsThroughTheParent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, dsn := newSink(t, Options{})
	admin := connect(t, dsn)
	now := time.Now()
	if _, err := admin.Exec(ctx, `SELECT kube_cdc.changes_partition_create($1::timestamp)`, monthStart(now, -2).Format("2006-01-02")); err != nil {
		t.Fatal(err)
	}
	role, password := "writer_"+randomSuffix(), "pw-"+randomSuffix()
	for _, sql := range []string{
		"CREATE ROLE %s LOGIN PASSWORD '" + password + "'",
		"GRANT USAGE ON SCHEMA kube_cdc TO %s",
		"GRANT SELECT, INSERT, UPDATE ON kube_cdc.objects, kube_cdc.checkpoints, kube_cdc.quarantine TO %s",
		"GRANT SELECT, INSERT, DELETE ON kube_cdc.changes TO %s",
		"GRANT USAGE ON SEQUENCE kube_cdc.changes_id_seq TO %s",
	} {
		if _, err := admin.Exec(ctx, fmt.Sprintf(sql, role)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
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
	u := mustURL(t, dsn)
	u.User = url.UserPassword(role, password)
	// No Retention option: the background retention would race the replay below.
	s, _ := newSink(t, Options{DSN: u.String(), PartitionsAhead: 6}) // Migrate false
	old := cm("old", "u", 1, change.OpCreate)
	old.ObservedAt = monthStart(now, -2).Add(time.Hour)
	write(t, s, batch(2, old, cm("new", "u", 2, change.OpCreate)))
	write(t, s, batch(2, old)) // a replay: the guard reads changes
	if got, want := changesRows(t, dsn), []string{"old@1:create", "new@2:create"}; !slices.Equal(got, want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
	res, err := s.Retain(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatalf("Retain as a role that owns nothing: %v", err)
	}
	if res.Deleted != 1 || len(res.Dropped) != 0 {
		t.Errorf("Retain deleted %d rows and dropped %v, want the old row deleted and nothing dropped", res.Deleted, res.Dropped)
	}
	if got := partitionNames(t, dsn); slices.Contains(got, partitionName(monthStart(now, 6))) {
		t.Errorf("partitions %v: a role that owns nothing created one", got)
	}
}

// With retentionByPartition, retention drops the months entirely older than the cutoff
// and deletes no row one by one: the month the cutoff falls in keeps its older rows.
func TestRetentionByPartitionDropsWholeMonthsAndDeletesNoRow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{RetentionByPartition: true})
	conn := connect(t, dsn)
	now := time.Now()
	for i, m := range []time.Time{monthStart(now, -2), monthStart(now, -1)} {
		if _, err := conn.Exec(ctx, `SELECT kube_cdc.changes_partition_create($1::timestamp)`, m.Format("2006-01-02")); err != nil {
			t.Fatal(err)
		}
		c := cm(fmt.Sprintf("m%d", i), "u", change.RV(i+1), change.OpCreate)
		c.ObservedAt = m.Add(time.Hour)
		write(t, s, batch(change.RV(i+1), c))
	}
	res, err := s.Retain(ctx, monthStart(now, -1).Add(2*time.Hour)) // past m1's row, inside its month
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Dropped, []string{partitionName(monthStart(now, -2))}) || res.Deleted != 0 {
		t.Errorf("dropped %v and deleted %d rows, want %s dropped and no row deleted", res.Dropped, res.Deleted, partitionName(monthStart(now, -2)))
	}
	if got := changesRows(t, dsn); !slices.Equal(got, []string{"m1@2:create"}) {
		t.Errorf("changes = %v, want the boundary month's row kept", got)
	}
}

// A partition retention detached but did not drop (stopped between the two) is dropped
// by the next run; a table of the same shape without the mark is left alone.
func TestRetentionDropsAPartitionItDetachedButDidNotDrop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, dsn := newSink(t, Options{})
	conn := connect(t, dsn)
	for _, sql := range []string{
		`CREATE TABLE kube_cdc.changes_2001_01 (LIKE kube_cdc.changes)`,
		`COMMENT ON TABLE kube_cdc.changes_2001_01 IS 'kube-cdc: detached by retention, to be dropped'`, // schema's detachedMark
		`CREATE TABLE kube_cdc.changes_2001_02 (LIKE kube_cdc.changes)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Retain(ctx, time.Now().AddDate(0, -1, 0)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM pg_class WHERE relname IN ('changes_2001_01', 'changes_2001_02')`); n != 1 {
		t.Errorf("%d of the two tables left, want the unmarked one", n)
	}
	if n := count(t, dsn, `SELECT count(*) FROM pg_class WHERE relname = 'changes_2001_02'`); n != 1 {
		t.Error("retention dropped a table it had not detached")
	}
}
