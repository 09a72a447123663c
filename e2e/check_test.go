package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// `check` says FAIL wherever `run` would fail (issue 9): every test here runs both with
// the same config and asserts they agree, FAIL with a non-zero exit of run, ok with a run
// that syncs.

func TestCheckAndRunAgreeOnAPostgresRoleThatMayOnlyRead(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "ro")
	createConfigMaps(t, ns, 0, 2, nil)
	dsn := pg.NewDatabase(t)
	resources := "  - name: configmaps\n    namespaces: [" + ns + "]"
	if code, out := runCLI(t, "migrate", "-c", pgConfig(t, dsn, resources, "")); code != 0 {
		t.Fatalf("migrate as the superuser: exit %d\n%s", code, out)
	}
	role, roleDSN := checkRole(t, dsn,
		"GRANT USAGE ON SCHEMA kube_cdc TO %s",
		"GRANT SELECT ON ALL TABLES IN SCHEMA kube_cdc TO %s")
	cfg := pgConfig(t, roleDSN, resources, "")

	checkFails(t, cfg, `sink warehouse\s+FAIL\s+role `+role+` may not INSERT into kube_cdc\.objects, .*UPDATE kube_cdc\.checkpoints`)
	checkRunFails(t, cfg, "42501")

	// Exactly what check asked for, and not a privilege more: check says ok and run syncs,
	// so check asks for nothing run does not need.
	checkGrant(t, dsn, role,
		"GRANT INSERT, UPDATE ON kube_cdc.objects, kube_cdc.checkpoints, kube_cdc.quarantine TO %s",
		"GRANT INSERT ON kube_cdc.changes TO %s",
		"GRANT USAGE ON SEQUENCE kube_cdc.changes_id_seq TO %s")
	checkPasses(t, cfg, `sink warehouse\s+ok\s+postgres reachable as `+role)
	checkRunSyncs(t, cfg, dsn)
}

func TestCheckAndRunAgreeOnAPostgresRoleWithoutCreateWhenMigrateIsTrue(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "nc")
	createConfigMaps(t, ns, 0, 1, nil)
	resources := "  - name: configmaps\n    namespaces: [" + ns + "]"

	t.Run("fresh database", func(t *testing.T) {
		dsn := pg.NewDatabase(t)
		role, roleDSN := checkRole(t, dsn)
		cfg := pgConfig(t, roleDSN, resources, "")
		checkFails(t, cfg, `sink warehouse\s+FAIL\s+role `+role+` may not CREATE in database `+checkDatabase(t, dsn)+` \(needed to create schema kube_cdc`)
		checkRunFails(t, cfg, "42501")

		// The same config once the role may create the schema: ok, and run syncs.
		checkGrant(t, dsn, role, "GRANT CREATE ON DATABASE "+pgx.Identifier{checkDatabase(t, dsn)}.Sanitize()+" TO %s")
		checkPasses(t, cfg, `sink warehouse\s+ok\s+postgres reachable as `+role+`; schema kube_cdc will be created at start`)
		checkRunSyncs(t, cfg, dsn)
	})

	t.Run("empty schema", func(t *testing.T) {
		dsn := pg.NewDatabase(t)
		checkExec(t, dsn, "CREATE SCHEMA kube_cdc")
		role, roleDSN := checkRole(t, dsn, "GRANT USAGE ON SCHEMA kube_cdc TO %s")
		cfg := pgConfig(t, roleDSN, resources, "")
		checkFails(t, cfg, `sink warehouse\s+FAIL\s+role `+role+` may not CREATE in schema kube_cdc \(needed to apply pending migrations 001_init`)
		checkRunFails(t, cfg, "42501")
	})
}

func TestCheckAndRunAgreeWhenTheSchemaIsNotMigratedAndMigrateIsFalse(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "nm")
	createConfigMaps(t, ns, 0, 1, nil)
	dsn := pg.NewDatabase(t)
	yaml := strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""),
		"    postgres:\n", "    postgres:\n      migrate: false\n", 1)
	cfg := writeConfig(t, yaml)
	checkFails(t, cfg, `sink warehouse\s+FAIL\s+schema kube_cdc is not migrated \(it does not exist\); run kube-cdc migrate or set migrate: true`)
	checkRunFails(t, cfg, "kube_cdc")

	if code, out := runCLI(t, "migrate", "-c", cfg); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	checkPasses(t, cfg, `sink warehouse\s+ok\s+postgres reachable as \S+; may read and write schema kube_cdc`)
	checkRunSyncs(t, cfg, dsn)
}

func TestCheckAndRunAgreeOnAUserWhoMayListButNotWatch(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "lw")
	createConfigMaps(t, ns, 0, 2, nil)
	dsn := pg.NewDatabase(t)
	_, kc, err := kube.RestrictedUser(context.Background(), "e2e-check-list-only", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""), kube.Kubeconfig, kc, 1))
	checkFails(t, cfg, `resource configmaps\s+FAIL\s+watch configmaps not allowed: user system:serviceaccount:kube-cdc-testenv:e2e-check-list-only may list but not watch configmaps in namespace `+ns+`\s*\n`)
	checkRunFails(t, cfg, "may list but not watch")
	// run refused before it wrote anything: a snapshot it could not follow with a watch
	// would be stale at once.
	conn := connect(t, dsn)
	var migrated bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass('kube_cdc.changes') IS NOT NULL`).Scan(&migrated); err != nil {
		t.Fatal(err)
	}
	rows := 0
	if migrated {
		if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM kube_cdc.objects) + (SELECT count(*) FROM kube_cdc.changes)`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
	}
	if rows != 0 {
		t.Errorf("run wrote %d rows before failing on a resource it may not watch", rows)
	}
}

// Each configured namespace is listed and watched through its own path, so a RoleBinding
// there suffices: check asks in each namespace, as run reads, and names the one where the
// user may not.
func TestCheckAndRunAgreeOnNamespacedRBAC(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	a, b := namespace(t, "a"), namespace(t, "b")
	createConfigMaps(t, a, 0, 1, nil)
	createConfigMaps(t, b, 0, 1, nil)
	const user = "e2e-check-ns-only"
	_, kc, err := kube.RestrictedUser(ctx, user, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRoleBinding(t, a, user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}})

	dsn := pg.NewDatabase(t)
	config := func(namespaces string) string {
		return writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+namespaces+"]", ""), kube.Kubeconfig, kc, 1))
	}
	both := config(a + ", " + b)
	checkFails(t, both, `resource configmaps\s+ok\s+list, watch allowed in namespace `+a+`\b`)
	checkFails(t, both, `resource configmaps\s+FAIL\s+list configmaps not allowed: user \S+ may neither list nor watch configmaps in namespace `+b+`\s*\n`)
	checkRunFails(t, both, "configmaps")

	one := config(a)
	checkPasses(t, one, `resource configmaps\s+ok\s+list, watch allowed in namespace `+a)
	checkRunSyncs(t, one, dsn)
}

// RoleBindings in exactly the configured namespaces suffice (design §1.9): a user who may
// list and watch ConfigMaps in a and b, and nowhere else, passes check with a row per
// namespace, and run syncs both namespaces, snapshot and watch alike.
func TestCheckAndRunAgreeOnRoleBindingsInBothConfiguredNamespaces(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	a, b := namespace(t, "a"), namespace(t, "b")
	createConfigMaps(t, a, 0, 2, nil)
	createConfigMaps(t, b, 0, 3, nil)
	const user = "e2e-check-two-ns"
	_, kc, err := kube.RestrictedUser(ctx, user, nil)
	if err != nil {
		t.Fatal(err)
	}
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	checkRoleBinding(t, a, user, rule)
	checkRoleBinding(t, b, user, rule)

	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+a+", "+b+"]", ""), kube.Kubeconfig, kc, 1))
	code, out := runCLI(t, "check", "-c", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d, want 0\n%s", code, out)
	}
	for _, ns := range []string{a, b} {
		if !regexp.MustCompile(`resource configmaps\s+ok\s+list, watch allowed in namespace ` + ns + `\b`).MatchString(out) {
			t.Errorf("check: no ok row for namespace %s in:\n%s", ns, out)
		}
	}

	d := start(t, "run", "-c", cfg)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, a, b) })
	// Then the watches, one per namespace: a change in each arrives.
	createConfigMaps(t, a, 2, 3, nil)
	createConfigMaps(t, b, 3, 4, nil)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, a, b) })
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints WHERE resource = 'configmaps' AND resource_version > 0`); n != 2 {
		t.Errorf("%d checkpoints, want one per namespace", n)
	}
	stopOK(t, d)
}

// checkFails runs `kube-cdc check -c cfg` and asserts a non-zero exit and a row matching
// want.
func checkFails(t *testing.T, cfg, want string) {
	t.Helper()
	code, out := runCLI(t, "check", "-c", cfg)
	if code == 0 {
		t.Fatalf("check: exit 0, want non-zero\n%s", out)
	}
	if !regexp.MustCompile(want).MatchString(out) {
		t.Fatalf("check: no row matching %q in:\n%s", want, out)
	}
	t.Logf("check:\n%s", out)
}

// checkPasses runs `kube-cdc check -c cfg` and asserts exit 0 and a row matching want.
func checkPasses(t *testing.T, cfg, want string) {
	t.Helper()
	code, out := runCLI(t, "check", "-c", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d, want 0\n%s", code, out)
	}
	if !regexp.MustCompile(want).MatchString(out) {
		t.Fatalf("check: no row matching %q in:\n%s", want, out)
	}
}

// checkRunFails asserts that `kube-cdc run -c cfg` exits non-zero by itself, within a
// deadline, with a last line containing want.
func checkRunFails(t *testing.T, cfg, want string) {
	t.Helper()
	d := start(t, "run", "-c", cfg)
	code, stderr := d.wait(60 * time.Second)
	last := lastLine(stderr)
	if code == 0 {
		t.Fatalf("run: exit 0 where check said FAIL; last line %q", last)
	}
	if !strings.Contains(last, want) {
		t.Errorf("run: last line %q does not contain %q", last, want)
	}
	t.Logf("run: exit %d: %s", code, last)
}

// checkRunSyncs asserts that `kube-cdc run -c cfg` syncs its one resource into dsn's
// database (a checkpoint row), then stops it.
func checkRunSyncs(t *testing.T, cfg, dsn string) {
	t.Helper()
	d := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("run: exit %d after SIGTERM\n%s", code, d.log())
	}
}

// checkRole creates a login role in the server of dsn, runs grants (each with %s for the
// role) in dsn's database, and returns the role's name and a DSN for that database as it.
// The role, and whatever it owns or was granted there, is dropped when t ends.
func checkRole(t *testing.T, dsn string, grants ...string) (string, string) {
	t.Helper()
	role := "e2e_check_" + strconv.FormatUint(rand.Uint64()%(36*36*36*36*36*36), 36)
	password := strconv.FormatUint(rand.Uint64(), 36)
	checkExec(t, pg.AdminDSN(), fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	t.Cleanup(func() {
		checkExec(t, dsn, "DROP OWNED BY "+role)
		checkExec(t, pg.AdminDSN(), "DROP ROLE "+role)
	})
	checkGrant(t, dsn, role, "GRANT CONNECT ON DATABASE "+pgx.Identifier{checkDatabase(t, dsn)}.Sanitize()+" TO %s")
	checkGrant(t, dsn, role, grants...)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	return role, u.String()
}

func checkGrant(t *testing.T, dsn, role string, grants ...string) {
	t.Helper()
	for _, g := range grants {
		checkExec(t, dsn, fmt.Sprintf(g, role))
	}
}

// checkExec runs sql as the superuser of dsn.
func checkExec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// checkDatabase is the database name of dsn.
func checkDatabase(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// checkRoleBinding lets the RestrictedUser named user do what rule allows in namespace ns
// (a Role and a RoleBinding) and waits until the authorizer has seen it.
func checkRoleBinding(t *testing.T, ns, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	rbac := kube.Clientset().RbacV1()
	name := "e2e-check-" + user
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: "kube-cdc-testenv"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		for _, verb := range rule.Verbs {
			r, err := kube.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:kube-cdc-testenv:" + user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rule.APIGroups[0], Resource: rule.Resources[0]},
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !r.Status.Allowed {
				return fmt.Errorf("%s %s in %s not yet allowed", verb, rule.Resources[0], ns)
			}
		}
		return nil
	})
}
