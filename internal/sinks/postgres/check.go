package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kube-cdc/kube-cdc/internal/pgdb"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/migrations"
)

// Check is what `kube-cdc check` says of a PostgreSQL sink named name: the detail of an
// ok row, or the error of a failed one. It connects as run does (New), without
// migrating and without recording the cluster's retention or creating partitions, then asks the server (has_*_privilege, the catalogs; it changes nothing)
// whether the role may do what run will do: create the schema or its tables when
// migrations are pending and migrate is true, and read and write kube-cdc's tables. A
// role that may connect and read but not write passed the connect-and-probe test alone,
// and run then failed on its first batch with 42501.
func Check(ctx context.Context, name, cluster string, o Options, log *slog.Logger) (string, error) {
	migrate := o.Migrate
	o.Migrate = false // check changes nothing
	s, openErr := openSink(ctx, name, cluster, o, log)
	if openErr == nil {
		openErr = s.Close()
	}
	var pgErr *pgconn.PgError
	if openErr != nil && !(errors.As(openErr, &pgErr) && slices.Contains([]string{"42P01", "3F000", "42501"}, pgErr.Code)) {
		return "", openErr // unreachable, wrong credentials, unknown database: say so as run would
	}
	st, err := probePostgres(ctx, o.DSN, o.Schema)
	if err != nil {
		return "", err
	}
	detail, problems := st.judge(o, migrate)
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	if openErr != nil && !(migrate && errors.As(openErr, &pgErr) && pgErr.Code != "42501" && st.pendingFrom() != nil) {
		// The probe found nothing, yet run's own start failed, and not for want of tables
		// that migrate: true is about to create: trust run.
		return "", openErr
	}
	return detail, nil
}

// pgState is what the server says about the role, the database and the schema.
type pgState struct {
	role, database      string
	createDB, tempDB    bool // on the current database
	schemaExists        bool
	usage, createSchema bool               // on the schema, when it exists
	tables              map[string]pgTable // kube-cdc's tables that exist, by name
	applied             map[string]bool    // schema_migrations' versions, when readable
	migrationsReadable  bool               // schema_migrations exists and the role may SELECT from it
}

type pgTable struct {
	privileges map[string]bool // SELECT, INSERT, UPDATE, DELETE
	sequences  map[string]bool // the table's own sequences (bigserial): name → may use
}

// runTables are the tables run reads and writes (tablePrivileges); checkTables adds
// schema_migrations, which migrate: true reads at every start.
var (
	runTables   = []string{"objects", "changes", "checkpoints", "quarantine", "history_skipped", "events"}
	checkTables = append(slices.Clone(runTables), "schema_migrations")
)

func probePostgres(ctx context.Context, dsn, schema string) (*pgState, error) {
	conn, password, err := pgdb.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := readPGState(ctx, conn, schema)
	if err != nil {
		return nil, fmt.Errorf("read the role's privileges: %s", pgdb.ScrubPassword(err.Error(), password))
	}
	return st, nil
}

func readPGState(ctx context.Context, conn *pgx.Conn, name string) (*pgState, error) {
	st := &pgState{tables: map[string]pgTable{}}
	// By OID throughout: a lookup by name would itself fail without USAGE on the schema.
	var nsp *uint32
	if err := conn.QueryRow(ctx, `SELECT current_user, current_database(),
			has_database_privilege(current_database(), 'CREATE'), has_database_privilege(current_database(), 'TEMP'),
			(SELECT oid FROM pg_namespace WHERE nspname = $1)`, name).
		Scan(&st.role, &st.database, &st.createDB, &st.tempDB, &nsp); err != nil {
		return nil, err
	}
	if nsp == nil {
		return st, nil
	}
	st.schemaExists = true
	if err := conn.QueryRow(ctx, `SELECT has_schema_privilege($1::oid, 'USAGE'), has_schema_privilege($1::oid, 'CREATE')`, *nsp).
		Scan(&st.usage, &st.createSchema); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT c.relname,
			has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'),
			has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'DELETE'),
			coalesce((SELECT array_agg(s.relname::text) FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
			           WHERE d.classid = 'pg_class'::regclass AND d.refobjid = c.oid AND d.deptype IN ('a', 'i') AND s.relkind = 'S'), '{}'),
			coalesce((SELECT array_agg(has_sequence_privilege(s.oid, 'USAGE') OR has_sequence_privilege(s.oid, 'UPDATE'))
			            FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
			           WHERE d.classid = 'pg_class'::regclass AND d.refobjid = c.oid AND d.deptype IN ('a', 'i') AND s.relkind = 'S'), '{}')
		  FROM pg_class c
		 WHERE c.relnamespace = $1::oid AND c.relname = ANY($2) AND c.relkind IN ('r', 'p')`, *nsp, checkTables)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			name               string
			sel, ins, upd, del bool
			seqs               []string
			seqOK              []bool
		)
		if err := rows.Scan(&name, &sel, &ins, &upd, &del, &seqs, &seqOK); err != nil {
			rows.Close()
			return nil, err
		}
		t := pgTable{privileges: map[string]bool{"SELECT": sel, "INSERT": ins, "UPDATE": upd, "DELETE": del}, sequences: map[string]bool{}}
		for i, s := range seqs {
			t.sequences[s] = i < len(seqOK) && seqOK[i]
		}
		st.tables[name] = t
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if t, ok := st.tables["schema_migrations"]; ok && st.usage && t.privileges["SELECT"] {
		st.migrationsReadable = true
		st.applied = map[string]bool{}
		versions, err := schema.AppliedVersions(ctx, conn, name)
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			st.applied[v] = true
		}
	}
	return st, nil
}

// pendingFrom is the migrations run would apply with migrate: true, in order; nil when
// none are, or when the role may not read schema_migrations (judge says so).
func (st *pgState) pendingFrom() []string {
	all := migrations.Versions()
	switch {
	case !st.schemaExists:
		return all
	case !st.usage:
		return nil
	case st.tables["schema_migrations"].privileges == nil:
		return all
	case !st.migrationsReadable:
		return nil
	}
	var pending []string
	for _, v := range all {
		if !st.applied[v] {
			pending = append(pending, v)
		}
	}
	return pending
}

// judge returns the ok detail, or the problems: one sentence naming every missing
// privilege and its object, and one for a schema that is not migrated. run would fail
// on any of them.
func (st *pgState) judge(o Options, migrate bool) (string, []string) {
	schema := o.Schema
	var denied, problems []string
	deny := func(format string, args ...any) { denied = append(denied, fmt.Sprintf(format, args...)) }
	// One sentence for every missing privilege ("role app may not INSERT into kube_cdc.objects,
	// UPDATE kube_cdc.objects"), first; then what else is wrong.
	verdict := func(detail string) (string, []string) {
		if len(denied) > 0 {
			problems = append([]string{fmt.Sprintf("role %s may not %s", st.role, strings.Join(denied, ", "))}, problems...)
		}
		return detail, problems
	}
	if !st.tempDB {
		deny("create TEMP tables in database %s (TEMP: every connection stages its batches in one)", st.database)
	}
	notMigrated := func(what string) {
		problems = append(problems, fmt.Sprintf("schema %s is not migrated (%s); run kube-cdc migrate or set migrate: true", schema, what))
	}
	if !st.schemaExists {
		if !migrate {
			notMigrated("it does not exist")
		} else if !st.createDB {
			deny("CREATE in database %s (needed to create schema %s: migrate is true and the schema does not exist)", st.database, schema)
		}
		return verdict(fmt.Sprintf("postgres reachable as %s; schema %s will be created at start (migrate: true)", st.role, schema))
	}
	if !st.usage {
		deny("use schema %s (USAGE)", schema)
		return verdict("")
	}

	var pending []string
	if migrate {
		if t, ok := st.tables["schema_migrations"]; ok && !t.privileges["SELECT"] {
			deny("SELECT from %s.schema_migrations (migrate: true reads it at every start)", schema)
		}
		pending = st.pendingFrom()
		if len(pending) > 0 {
			if !st.createSchema {
				deny("CREATE in schema %s (needed to apply pending migrations %s: migrate is true)", schema, strings.Join(pending, ", "))
			}
			if t, ok := st.tables["schema_migrations"]; ok && !t.privileges["INSERT"] {
				deny("INSERT into %s.schema_migrations (needed to record migrations %s)", schema, strings.Join(pending, ", "))
			}
		}
	} else {
		var missing []string
		for _, name := range runTables {
			if _, ok := st.tables[name]; !ok && tablePrivileges(name, o) != nil {
				missing = append(missing, schema+"."+name)
			}
		}
		if len(missing) > 0 {
			notMigrated("missing " + strings.Join(missing, ", "))
		}
	}

	// Tables a pending migration creates will be the role's own; the others need grants.
	for _, name := range runTables {
		t, ok := st.tables[name]
		if !ok {
			continue
		}
		qualified := schema + "." + name
		for _, priv := range tablePrivileges(name, o) {
			if t.privileges[priv] {
				continue
			}
			switch priv {
			case "SELECT", "DELETE":
				deny("%s from %s", priv, qualified)
			case "INSERT":
				deny("INSERT into %s", qualified)
			default:
				deny("%s %s", priv, qualified)
			}
		}
		for _, seq := range slices.Sorted(maps.Keys(t.sequences)) {
			if !t.sequences[seq] && slices.Contains(tablePrivileges(name, o), "INSERT") {
				deny("use sequence %s.%s (USAGE: the ids of %s come from it)", schema, seq, qualified)
			}
		}
	}
	detail := fmt.Sprintf("postgres reachable as %s; may read and write schema %s", st.role, schema)
	if len(pending) > 0 {
		detail += fmt.Sprintf(" and apply %s at start (migrate: true)", strings.Join(pending, ", "))
	}
	return verdict(detail)
}

// tablePrivileges is what run does to each table (statements.go):
// the RV-guarded upsert reads, inserts and updates objects; changes are inserted and
// read (the replay guard), and deleted by retention; checkpoints are read and upserted;
// quarantine rows are inserted and resolved; history_skipped rows are upserted when a
// resource has ignore paths (Options.Noise); events rows are written when Kubernetes
// Events are streamed into their table (Options.StreamsEvents).
func tablePrivileges(table string, o Options) []string {
	switch table {
	case "objects":
		if o.HardDelete {
			return []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
		}
		return []string{"SELECT", "INSERT", "UPDATE"}
	case "changes":
		// SELECT: the insert asks changes whether a change is there already (migration
		// 012 left no UNIQUE key to do it).
		if o.Retention > 0 {
			return []string{"INSERT", "SELECT", "DELETE"}
		}
		return []string{"INSERT", "SELECT"}
	case "checkpoints", "quarantine":
		return []string{"SELECT", "INSERT", "UPDATE"}
	case "history_skipped":
		// Counted by an upsert that adds to the row (noise.go), only for resources with
		// ignore paths.
		if o.Noise {
			return []string{"SELECT", "INSERT", "UPDATE"}
		}
	case "events":
		// Kubernetes Events in their table (events.go): upserted, marked deleted, read as
		// the key index, deleted by their retention.
		if o.StreamsEvents && o.Events.Table {
			if o.Events.Retention > 0 {
				return []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
			}
			return []string{"SELECT", "INSERT", "UPDATE"}
		}
	}
	return nil
}
