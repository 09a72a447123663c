// Package historygen fills kube-cdc's real PostgreSQL schema with a history at fleet
// scale, for benchmarks: n changes rows spread over several clusters and months, with
// realistic ConfigMap-like objects (about 1.2 KB of JSON), the objects rows of their
// newest versions, and a checkpoint per cluster (history() with no cluster reads the
// clusters from checkpoints). Rows go in with COPY into the schema's own tables (changes
// partitioned or not); the non-constraint indexes of changes are dropped before the load
// and built again after it, which is several times faster than maintaining them row by
// row; then VACUUM (ANALYZE). Generate is deterministic for given Options.
package historygen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/read/history"
)

// Options shape the history. Zero fields take the defaults in brackets.
type Options struct {
	Rows                int       // changes rows [10,000,000]
	Clusters            int       // clusters "cluster-0"… [3]
	Months              int       // the rows span this many months before End [12]
	Namespaces          int       // namespaces per cluster, "ns-0"… [40]
	ObjectsPerNamespace int       // ConfigMaps per namespace, "cm-0"… [1,000]
	ObjectBytes         int       // about this much JSON per object [1,200]
	End                 time.Time // the newest row's observed_at [now]
	Seed                uint64    // [1]
	// AuditedNamespaces: every change in the first this many namespaces of cluster-0
	// gets the audit event the receiver would store for a write audited at
	// RequestResponse (its response RV: the exact join of migration 014) [0: none].
	AuditedNamespaces int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Rows, 10_000_000)
	def(&o.Clusters, 3)
	def(&o.Months, 12)
	def(&o.Namespaces, 40)
	def(&o.ObjectsPerNamespace, 1000)
	def(&o.ObjectBytes, 1200)
	if o.End.IsZero() {
		o.End = time.Now()
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Cluster, Namespace and Object name the generated keys.
func Cluster(i int) string   { return fmt.Sprintf("cluster-%d", i) }
func Namespace(i int) string { return fmt.Sprintf("ns-%d", i) }
func Object(i int) string    { return fmt.Sprintf("cm-%d", i) }

// Result says what Generate wrote and how long it took.
type Result struct {
	Options                Options
	Objects                int
	AuditEvents            int
	Indexes                []string // the indexes of changes dropped for the load and built again
	Load, Reindex, Analyze time.Duration
}

// Generate writes the history into schema (migrated already) over conn.
func Generate(ctx context.Context, conn *pgx.Conn, schema string, o Options) (Result, error) {
	o = o.withDefaults()
	res := Result{Options: o}
	s := pgx.Identifier{schema}.Sanitize()
	start := o.End.AddDate(0, -o.Months, 0)
	// The months' partitions, when changes is partitioned (migration 012).
	var partitioned bool
	if err := conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", schema+".changes_partition_create(timestamp)").Scan(&partitioned); err != nil {
		return res, err
	}
	if partitioned {
		// From the first of start's month: a month added to the 29th–31st can skip one
		// (January 29 + 1 month is March 1), whose rows then land in the default partition.
		for m := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, start.Location()); !m.After(o.End); m = m.AddDate(0, 1, 0) {
			if _, err := conn.Exec(ctx, "SELECT "+s+".changes_partition_create($1::timestamp)", m.UTC().Format("2006-01-02")); err != nil {
				return res, fmt.Errorf("create the partition of %s: %w", m.Format("2006-01"), err)
			}
		}
	}
	rows, err := conn.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = $1 AND i.tablename = 'changes'
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.connamespace = $1::regnamespace)`, schema)
	if err != nil {
		return res, err
	}
	type index struct{ name, def string }
	indexes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (index, error) {
		var ix index
		err := row.Scan(&ix.name, &ix.def)
		return ix, err
	})
	if err != nil {
		return res, err
	}
	for _, ix := range indexes {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{schema, ix.name}.Sanitize()); err != nil {
			return res, err
		}
	}

	t0 := time.Now()
	src := newSource(o, start)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "changes"},
		[]string{"cluster", "api_group", "resource", "namespace", "name", "uid", "resource_version", "op", "object", "changed_by", "observed_at", "epoch", "changed"},
		src); err != nil {
		return res, fmt.Errorf("copy changes: %w", err)
	}
	if len(src.audit) > 0 {
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "audit_events"},
			[]string{"audit_id", "cluster", "verb", "api_group", "resource", "namespace", "name", "response_rv", "response_uid",
				"username", "user_agent", "code", "request_at", "stage_at", "received_at"},
			pgx.CopyFromRows(src.audit)); err != nil {
			return res, fmt.Errorf("copy audit events: %w", err)
		}
		res.AuditEvents = len(src.audit)
	}
	objects := src.objects()
	res.Objects = len(objects)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "objects"},
		[]string{"cluster", "api_group", "api_version", "resource", "kind", "namespace", "name", "uid", "resource_version", "labels", "object", "changed_by", "created_at", "updated_at"},
		pgx.CopyFromRows(objects)); err != nil {
		return res, fmt.Errorf("copy objects: %w", err)
	}
	for c := range o.Clusters {
		if _, err := conn.Exec(ctx, `INSERT INTO `+s+`.checkpoints (cluster, sink, api_group, resource, scope, resource_version)
			VALUES ($1, 'warehouse', '', 'configmaps', '', $2) ON CONFLICT DO NOTHING`, Cluster(c), src.rv); err != nil {
			return res, err
		}
	}
	res.Load = time.Since(t0)
	t0 = time.Now()
	for _, ix := range indexes {
		res.Indexes = append(res.Indexes, ix.name)
		// pg_indexes spells a partitioned index "ON ONLY", which would build it on the
		// parent alone, invalid, and no partition's.
		if _, err := conn.Exec(ctx, strings.Replace(ix.def, " ON ONLY ", " ON ", 1)); err != nil {
			return res, fmt.Errorf("rebuild index %s: %w", ix.name, err)
		}
	}
	res.Reindex = time.Since(t0)
	t0 = time.Now()
	// VACUUM too: otherwise autovacuum visits the freshly loaded tables (insert
	// thresholds) during the measurements that follow.
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+s+".changes, "+s+".objects, "+s+".audit_events"); err != nil {
		return res, err
	}
	res.Analyze = time.Since(t0)
	return res, nil
}

// source produces the changes rows for CopyFrom, in observed_at (and so id) order.
type source struct {
	o      Options
	start  time.Time
	step   time.Duration
	rng    *rand.Rand
	i      int
	rv     int64
	latest map[int]int64 // key → newest RV
	row    []any
	pad    string
	audit  [][]any // audit_events rows (Options.AuditedNamespaces)
}

func newSource(o Options, start time.Time) *source {
	return &source{o: o, start: start, step: o.End.Sub(start) / time.Duration(o.Rows), rng: rand.New(rand.NewPCG(o.Seed, 22)),
		latest: map[int]int64{}, pad: strings.Repeat("abcdefghij", o.ObjectBytes/10)}
}

func (s *source) key(k int) (cluster, ns, name int) {
	per := s.o.ObjectsPerNamespace
	return k / (s.o.Namespaces * per), k / per % s.o.Namespaces, k % per
}

// document is key k's object at rv, as decoded JSON.
func (s *source) document(k int, rv int64) map[string]any {
	c, ns, name := s.key(k)
	off := int(rv % 10)
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": Object(name), "namespace": Namespace(ns), "uid": fmt.Sprintf("uid-%d-%d", c, k),
			"resourceVersion": fmt.Sprint(rv), "labels": map[string]any{"app": fmt.Sprintf("app-%d", name%50), "tier": "web"}},
		"data": map[string]any{"config.properties": s.pad[off:], "revision": fmt.Sprint(rv)},
	}
}

func (s *source) object(k int, rv int64) []byte {
	b, _ := json.Marshal(s.document(k, rv))
	return b
}

// changed is what the sink stores in changes.changed for an update of key k from
// version prev to rv (migration 017): the paths changed_paths lists, in its order.
func (s *source) changed(k int, prev, rv int64) []string {
	ops := history.JSONPatch(s.document(k, prev), s.document(k, rv))
	paths := make([]string, len(ops))
	for i, op := range ops {
		paths[i] = op.Path
	}
	slices.Sort(paths)
	return paths
}

func (s *source) Next() bool {
	if s.i >= s.o.Rows {
		return false
	}
	keys := s.o.Clusters * s.o.Namespaces * s.o.ObjectsPerNamespace
	k := s.rng.IntN(keys)
	c, ns, name := s.key(k)
	s.rv++
	op := "update"
	var changed []string // NULL for a create
	if prev, seen := s.latest[k]; !seen {
		op = "create"
	} else {
		changed = s.changed(k, prev, s.rv)
	}
	s.latest[k] = s.rv
	at := s.start.Add(time.Duration(s.i+1) * s.step)
	s.row = []any{Cluster(c), "", "configmaps", Namespace(ns), Object(name), fmt.Sprintf("uid-%d-%d", c, k), s.rv, op,
		json.RawMessage(s.object(k, s.rv)), "kubectl/Update", at, int32(0), changed}
	if c == 0 && ns < s.o.AuditedNamespaces {
		s.audit = append(s.audit, []any{fmt.Sprintf("audit-%d", s.rv), Cluster(c), op, "", "configmaps", Namespace(ns), Object(name),
			s.rv, fmt.Sprintf("uid-%d-%d", c, k), fmt.Sprintf("dev-%d@example.com", k%7), "kubectl/v1.36.5", int32(200),
			at.Add(-5 * time.Millisecond), at.Add(-2 * time.Millisecond), at})
	}
	s.i++
	return true
}

func (s *source) Values() ([]any, error) { return s.row, nil }
func (s *source) Err() error             { return nil }

// objects are the objects rows: every key's newest version.
func (s *source) objects() [][]any {
	out := make([][]any, 0, len(s.latest))
	for k, rv := range s.latest {
		c, ns, name := s.key(k)
		out = append(out, []any{Cluster(c), "", "v1", "configmaps", "ConfigMap", Namespace(ns), Object(name),
			fmt.Sprintf("uid-%d-%d", c, k), rv, json.RawMessage(fmt.Sprintf(`{"app":"app-%d","tier":"web"}`, name%50)),
			json.RawMessage(s.object(k, rv)), "kubectl/Update", s.o.End, s.o.End})
	}
	return out
}
