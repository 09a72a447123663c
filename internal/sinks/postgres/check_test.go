package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"
	"github.com/kube-cdc/kube-cdc/migrations"
)

// Check names every privilege run would miss, in one sentence, and passes once the role
// has exactly those: it asks for nothing run does not need.
func TestCheckNamesThePrivilegesARoleThatMayOnlyReadLacksAndPassesOnceGranted(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	if _, err := schema.Migrate(testCtx(t), dsn, "kube_cdc"); err != nil {
		t.Fatal(err)
	}
	role, password := "checker_"+randomSuffix(), "pw-of-checker-"+randomSuffix()
	admin := connect(t, dsn)
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(testCtx(t), fmt.Sprintf(sql, role)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE ROLE %s LOGIN PASSWORD '" + password + "'")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pg.AdminDSN())
		if err == nil {
			defer c.Close(context.Background())
			pg.TerminateBackends(context.Background(), strings.TrimPrefix(mustURL(t, dsn).Path, "/"))
			c.Exec(context.Background(), "DROP OWNED BY "+role)
			c.Exec(context.Background(), "DROP ROLE "+role)
		}
	})
	exec("GRANT USAGE ON SCHEMA kube_cdc TO %s")
	exec("GRANT SELECT ON ALL TABLES IN SCHEMA kube_cdc TO %s")
	u := mustURL(t, dsn)
	u.User = url.UserPassword(role, password)
	opts := Options{DSN: u.String(), Schema: "kube_cdc", MaxConns: 1, Migrate: false}

	_, err := Check(testCtx(t), "warehouse", cluster, opts, testLog(t))
	if err == nil {
		t.Fatal("Check passed a role that may only read")
	}
	for _, want := range []string{
		"role " + role + " may not INSERT into kube_cdc.objects, UPDATE kube_cdc.objects",
		"INSERT into kube_cdc.changes", "use sequence kube_cdc.changes_id_seq", "UPDATE kube_cdc.checkpoints",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("%q shows the password", err)
	}

	exec("GRANT INSERT, UPDATE ON kube_cdc.objects, kube_cdc.checkpoints, kube_cdc.quarantine TO %s")
	exec("GRANT INSERT ON kube_cdc.changes TO %s")
	exec("GRANT USAGE ON SEQUENCE kube_cdc.changes_id_seq TO %s")
	detail, err := Check(testCtx(t), "warehouse", cluster, opts, testLog(t))
	if err != nil {
		t.Fatalf("Check with every privilege run needs: %v", err)
	}
	// A resource with ignore paths (node heartbeats): run counts what it leaves out.
	noisy := opts
	noisy.Noise = true
	if _, err := Check(testCtx(t), "warehouse", cluster, noisy, testLog(t)); err == nil ||
		!strings.Contains(err.Error(), "may not INSERT into kube_cdc.history_skipped, UPDATE kube_cdc.history_skipped") {
		t.Errorf("Check of a sink with ignore paths, without privileges on history_skipped: %v", err)
	}
	exec("GRANT INSERT, UPDATE ON kube_cdc.history_skipped TO %s")
	if _, err := Check(testCtx(t), "warehouse", cluster, noisy, testLog(t)); err != nil {
		t.Errorf("Check of a sink with ignore paths and every privilege run needs: %v", err)
	}
	if want := "postgres reachable as " + role + "; may read and write schema kube_cdc"; detail != want {
		t.Errorf("detail %q, want %q", detail, want)
	}
}

// Check reads which migrations the schema has (schema_migrations) and names those run
// would apply at start: the newest one here, which the schema lacks.
func TestCheckNamesTheMigrationsAPartlyMigratedSchemaLacks(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	versions := migrations.Versions()
	newest := versions[len(versions)-1]
	if _, err := schema.MigrateBefore(testCtx(t), dsn, "kube_cdc", newest); err != nil {
		t.Fatal(err)
	}
	detail, err := Check(testCtx(t), "warehouse", cluster, Options{DSN: dsn, Schema: "kube_cdc", Migrate: true, MaxConns: 1}, testLog(t))
	if err != nil {
		t.Fatalf("Check of a schema one migration behind, migrate: true: %v", err)
	}
	if want := "may read and write schema kube_cdc and apply " + newest + " at start (migrate: true)"; !strings.HasSuffix(detail, want) {
		t.Errorf("detail %q, want it to end %q", detail, want)
	}
}
