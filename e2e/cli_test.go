package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runCLI runs a short kube-cdc command and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	d := start(t, args...)
	code, stderr := d.wait(60 * time.Second)
	return code, d.out.String() + stderr
}

func TestMigrateAppliesTheSchemaOnceAndThenReportsItUpToDate(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, pgConfigYAML(dsn, "  - name: configmaps", ""))
	code, out := runCLI(t, "migrate", "-c", cfg)
	if code != 0 || !strings.Contains(out, "warehouse: applied 001_init") {
		t.Fatalf("first migrate: exit %d\n%s", code, out)
	}
	code, out = runCLI(t, "migrate", "-c", cfg)
	if code != 0 || !strings.Contains(out, "warehouse: schema kube_cdc is up to date") {
		t.Fatalf("second migrate: exit %d\n%s", code, out)
	}
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'kube_cdc' AND table_name IN ('objects', 'changes', 'checkpoints')`); n != 3 {
		t.Errorf("%d of the 3 tables exist", n)
	}
}

func TestCheckPrintsATableAndFailsWhenRBACForbidsAResource(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, pgConfigYAML(dsn, "  - name: configmaps\n  - name: secrets", ""))
	code, out := runCLI(t, "check", "-c", cfg)
	if code != 0 {
		t.Fatalf("check as admin: exit %d\n%s", code, out)
	}
	for _, row := range []string{`config\s+ok`, `apiserver\s+ok\s+https://127\.0\.0\.1:\d+ v1\.36`, `resource configmaps\s+ok`, `resource secrets\s+ok`, `sink warehouse\s+ok`} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("no row matching %q in:\n%s", row, out)
		}
	}
	_, kc, err := kube.RestrictedUser(ctx, "e2e-check", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg = writeConfig(t, strings.Replace(pgConfigYAML(dsn, "  - name: configmaps\n  - name: secrets", ""), kube.Kubeconfig, kc, 1))
	code, out = runCLI(t, "check", "-c", cfg)
	if code == 0 {
		t.Fatalf("check as the restricted user: exit 0\n%s", out)
	}
	if !regexp.MustCompile(`resource configmaps\s+ok`).MatchString(out) || !regexp.MustCompile(`resource secrets\s+FAIL\s+list secrets not allowed`).MatchString(out) {
		t.Errorf("want configmaps ok and secrets FAIL:\n%s", out)
	}
	if !strings.Contains(out, "kube-cdc: check: 1 of") {
		t.Errorf("no one-line summary of the failure:\n%s", out)
	}
	code, out = runCLI(t, "check", "--offline", "-c", writeConfig(t, "sinks: [{name: x, type: elastic}]\n"))
	if code == 0 || !strings.Contains(out, `sinks[0].type: unknown sink type "elastic"`) {
		t.Errorf("check --offline of an invalid config: exit %d\n%s", code, out)
	}
}

// Issue 24: the environment every daemon of these tests inherits carries
// KUBE_CDC_TRANSFORMS__DIGESTKEY (main_test.go); a file that names a key file as well is
// refused with a line that says where each came from, or the file alone would not show
// the conflict.
func TestADigestKeyInTheEnvironmentAndAKeyFileInTheFileAreRefusedNamingTheVariable(t *testing.T) {
	t.Parallel() // runs no server
	keyFile := filepath.Join(t.TempDir(), "digest-key")
	if err := os.WriteFile(keyFile, []byte(e2eDigestKey), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "transforms:\n  digestKeyFile: "+keyFile+"\n")
	code, out := runCLI(t, "check", "--offline", "-c", cfg)
	want := "kube-cdc: config: transforms.digestKeyFile: set transforms.digestKey (from KUBE_CDC_TRANSFORMS__DIGESTKEY) or transforms.digestKeyFile (from " + cfg + "), not both"
	if code == 0 || !strings.Contains(out, want) {
		t.Errorf("check --offline: exit %d, want a failure with the line\n%s\ngot:\n%s", code, want, out)
	}
	if strings.Contains(out, e2eDigestKey) {
		t.Errorf("the message shows the digest key:\n%s", out)
	}
}

func TestStatusShowsTheCheckpointAndObjectCountsPerResource(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "st")
	createConfigMaps(t, ns, 0, 3, nil)
	if err := kube.Clientset().CoreV1().ConfigMaps(ns).Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, pgConfigYAML(dsn, "  - name: configmaps\n    namespaces: ["+ns+"]", ""))
	d := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rv int64
	if err := connect(t, dsn).QueryRow(ctx, `SELECT resource_version FROM kube_cdc.checkpoints`).Scan(&rv); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "status", "-c", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	want := regexp.MustCompile(`warehouse\s+configmaps\s+namespace=` + regexp.QuoteMeta(ns) + `\s+` + strconv.FormatInt(rv, 10) + `\s+\S+\s+2\s+0`)
	if !want.MatchString(out) {
		t.Errorf("no status row for configmaps with checkpoint %d and 2 live objects:\n%s", rv, out)
	}
	code, out = runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "kube-cdc ") {
		t.Errorf("version: exit %d %q", code, out)
	}
}

func TestStatusReadsTheCheckpointStoreOfAStdoutSink(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "sf")
	createConfigMaps(t, ns, 0, 4, nil)
	var newest int64
	for _, v := range listedConfigMaps(t, ns) {
		_, rv, _ := strings.Cut(v, "@")
		newest = max(newest, rvInt(rv))
	}
	state := filepath.Join(t.TempDir(), "state.db")
	addr := opsFreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes: {kubeconfig: %q}
resources: [{name: configmaps, namespaces: [%s]}]
sinks: [{name: out, type: stdout, checkpoint: {type: file, path: %q}}]
metrics: {address: %q}
`, kube.Kubeconfig, ns, state, addr))
	d := start(t, "run", "-c", cfg)
	eventually(t, 30*time.Second, func() error {
		if n := strings.Count(d.out.String(), "\n"); n < 4 {
			return fmt.Errorf("%d lines on stdout, want 4", n)
		}
		return nil
	})
	// The checkpoint commits right after the lines are written; the gauge moves once it has.
	waitMetricAbove(t, d, addr, "kube_cdc_checkpoint_resource_version", map[string]string{"sink": "out", "resource": "configmaps"}, float64(newest-1), 30*time.Second)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	code, out := runCLI(t, "status", "-c", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if !regexp.MustCompile(`out\s+configmaps\s+namespace=` + regexp.QuoteMeta(ns) + `\s+[1-9][0-9]*\s+-\s+4\s+-`).MatchString(out) {
		t.Errorf("no status row for the stdout sink with a checkpoint and 4 live keys:\n%s", out)
	}
}

func TestEveryCommandRefusesASchemaANewerKubeCDCMigratedInOneLine(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, pgConfigYAML(dsn, "  - name: configmaps", ""))
	if code, out := runCLI(t, "migrate", "-c", cfg); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	conn := connect(t, dsn)
	if _, err := conn.Exec(context.Background(), `INSERT INTO kube_cdc.schema_migrations (version, checksum, applied_by)
		VALUES ('999_from_the_future', repeat('f', 64), '9.9.9')`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "-c", cfg}, {"migrate", "-c", cfg}, {"status", "-c", cfg}} {
		code, out := runCLI(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		if code != 1 || !strings.HasPrefix(last, "kube-cdc: ") || !strings.Contains(last, "the schema is newer than this kube-cdc: schema kube_cdc holds migration 999_from_the_future, applied by kube-cdc 9.9.9") {
			t.Errorf("%s: exit %d, last line %q; want exit 1 and one line naming 999_from_the_future and kube-cdc 9.9.9\n%s", args[0], code, last, out)
		}
	}
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.checkpoints`); n != 0 {
		t.Errorf("%d checkpoints written against a newer schema", n)
	}
}
