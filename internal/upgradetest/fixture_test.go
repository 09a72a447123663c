//go:build upgradefixture

package upgradetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// TestWriteTheFixtureOfAnOlderBinary writes testdata/<name>.sql and <name>.json: a schema
// migrated and filled by the kube-cdc binary KUBE_CDC_OLD_BINARY (built from the commit or
// release named KUBE_CDC_FIXTURE_NAME) against a real apiserver, with history, audit
// events (from the apiserver's audit log), a quarantined change, two clusters with their
// checkpoints, in monthly partitions. RELEASING.md says when to run it:
//
//	go test -tags upgradefixture -run TestWriteTheFixture ./internal/upgradetest/
func TestWriteTheFixtureOfAnOlderBinary(t *testing.T) {
	old, name := os.Getenv("KUBE_CDC_OLD_BINARY"), os.Getenv("KUBE_CDC_FIXTURE_NAME")
	if old == "" || name == "" {
		t.Fatal("set KUBE_CDC_OLD_BINARY (the older kube-cdc binary) and KUBE_CDC_FIXTURE_NAME (its version or commit, the fixture's file name)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	auditLog := filepath.Join(dir, "audit.log")
	kube := testenv.NewKube(t, testenv.KubeOptions{Audit: &testenv.AuditOptions{LogPath: auditLog, Policy: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
- level: None
`}})
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	cs := kube.Clientset()

	for _, ns := range []string{"app", "ops"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(ns, name string, data map[string]string) {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": "web"}}, Data: data}
			_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			cm.Data = data
			_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("put %s/%s: %v", ns, name, err)
		}
	}
	for i := range 5 {
		put("app", fmt.Sprintf("settings-%d", i), map[string]string{"v": "1"})
		put("ops", fmt.Sprintf("runbook-%d", i), map[string]string{"v": "1"})
	}

	run := func(cluster string, resources string) (stop func()) {
		t.Helper()
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, cluster+".yaml")
		yaml := fmt.Sprintf(`cluster: %s
kubernetes: {kubeconfig: %q}
resources:
%s
sinks:
  - name: warehouse
    type: postgres
    postgres: {dsn: %q}
metrics: {address: "127.0.0.1:%d"}
audit:
  logFile: {path: %q, pollInterval: 200ms}
`, cluster, kube.Kubeconfig, resources, dsn, port, auditLog)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		log, err := os.Create(filepath.Join(dir, cluster+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(old, "run", "-c", cfg)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return func() {
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				b, _ := os.ReadFile(log.Name())
				t.Fatalf("%s: %v\n%s", cluster, err, b)
			}
		}
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	waitFor := func(what, sql string, want int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var n int
			err := db.QueryRow(ctx, sql).Scan(&n)
			if err == nil && n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d (%v), want %d", what, n, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A Deployment owning a ReplicaSet owning a Pod on a node, and a Service selecting it,
	// by hand (no controllers): rows for the relation views.
	web := map[string]string{"app": "web"}
	dep := testenv.Deployment("app", "web", 1, "nginx:1")
	dep, err = cs.AppsV1().Deployments("app").Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-5d8f", Labels: web,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	if rs, err = cs.AppsV1().ReplicaSets("app").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-5d8f-x1", Labels: dep.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: dep.Spec.Template.Spec.Containers}}
	if _, err := cs.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: dep.Spec.Template.Labels, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services("app").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// east: everything; history with updates, a delete, a poison change in quarantine, the
	// audit events of every configmap write, the relation views' kinds.
	stop := run("east", "  - name: configmaps\n  - name: namespaces\n  - name: pods\n  - name: services\n  - name: deployments.apps\n  - name: replicasets.apps")
	waitFor("east's checkpoints", `SELECT count(*) FROM kube_cdc.checkpoints WHERE cluster = 'east'`, 6)
	for round := 2; round <= 4; round++ {
		put("app", "settings-0", map[string]string{"v": fmt.Sprint(round), "mode": "blue"})
		put("app", "settings-1", map[string]string{"v": fmt.Sprint(round)})
	}
	if err := cs.CoreV1().ConfigMaps("ops").Delete(ctx, "runbook-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	put("app", "poison", map[string]string{"v": "nul\x00byte"})
	waitFor("east's history", `SELECT count(*) FROM kube_cdc.changes WHERE cluster = 'east' AND name = 'settings-0' AND op = 'update'`, 3)
	waitFor("east's delete", `SELECT count(*) FROM kube_cdc.objects WHERE cluster = 'east' AND name = 'runbook-4' AND deleted_at IS NOT NULL`, 1)
	waitFor("east's quarantine", `SELECT count(*) FROM kube_cdc.quarantine WHERE cluster = 'east'`, 1)
	waitFor("east's audit events", `SELECT count(*) FROM kube_cdc.audit_events WHERE cluster = 'east'`, 6)
	stop()

	// west: the configmaps of one namespace only (a scope), from a cluster of its own name.
	stop = run("west", "  - name: configmaps\n    namespaces: [app]")
	waitFor("west's checkpoints", `SELECT count(*) FROM kube_cdc.checkpoints WHERE cluster = 'west'`, 1)
	put("app", "settings-2", map[string]string{"v": "west"})
	waitFor("west's history", `SELECT count(*) FROM kube_cdc.changes WHERE cluster = 'west' AND name = 'settings-2' AND op = 'update'`, 1)
	stop()

	out, err := exec.Command(filepath.Join(pgBin(t), "pg_dump"), "--dbname", dsn, "--schema", "kube_cdc",
		"--inserts", "--no-owner", "--no-privileges", "--no-comments").Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	// psql's meta-commands (\restrict, pg_dump 15.14 on) are not SQL: the test runs the
	// dump through the simple protocol.
	dump := regexp.MustCompile(`(?m)^\\.*\n`).ReplaceAll(out, nil)
	if err := os.WriteFile(filepath.Join("testdata", name+".sql"), dump, 0o644); err != nil {
		t.Fatal(err)
	}

	// What the test holds the upgraded schema to, beside what the fixture itself says.
	var exp expectations
	rows, err := db.Query(ctx, `SELECT cluster, sink, api_group, resource, scope, resource_version, epoch FROM kube_cdc.checkpoints ORDER BY 1, 2, 3, 4, 5`)
	if err != nil {
		t.Fatal(err)
	}
	exp.Checkpoints, err = pgx.CollectRows(rows, pgx.RowToStructByPos[checkpoint])
	if err != nil {
		t.Fatal(err)
	}
	exp.Rows = map[string]int{}
	for _, table := range fixtureTables {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM kube_cdc."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		exp.Rows[table] = n
	}
	b, _ := json.MarshalIndent(exp, "", "  ")
	if err := os.WriteFile(filepath.Join("testdata", name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote testdata/%s.sql (%d bytes) and .json: %s", name, len(dump), strings.ReplaceAll(string(b), "\n", " "))
}

// pgBin is the directory of the PostgreSQL server binaries testenv uses.
func pgBin(t *testing.T) string {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	if len(m) == 0 {
		t.Fatal("no /usr/lib/postgresql/*/bin/pg_dump: install the PostgreSQL server binaries (docs/development.md)")
	}
	return filepath.Dir(m[len(m)-1])
}

func ptr[T any](v T) *T { return &v }
