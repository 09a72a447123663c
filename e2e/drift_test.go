package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
	"github.com/segmentio/kafka-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 10, drift checks: with pipeline.resync on, a running daemon relists in the
// background. A resync of an unchanged namespace writes nothing; rows edited and deleted
// by hand in PostgreSQL are repaired by the next resync, named in a warn line and counted
// in kube_cdc_drift_total; and `kube-cdc resnapshot` through the running daemon reports
// what its relist listed and wrote, all objects with --full.
func TestAResyncRepairsARowEditedAndARowDeletedByHandAndAnUnchangedResyncWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "drift")
	dsn := pg.NewDatabase(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	const n = 5
	for i := range n {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addr := opsFreeAddr(t)
	// The signal ConfigMap lives outside the streamed namespace, or resnapshot's own
	// request would be a change.
	cfg := writeConfig(t, opsConfigYAML(dsn, ns, addr, fmt.Sprintf(`pipeline:
  resync: 2s
leaderElection:
  namespace: %s
  name: kube-cdc-drift
`, namespace(t, "signals"))))
	d := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	conn := connect(t, dsn)
	liveRows := fmt.Sprintf(`SELECT count(*) FROM kube_cdc.objects WHERE namespace = '%s' AND deleted_at IS NULL`, ns)
	eventually(t, 30*time.Second, func() error {
		if got := count(t, conn, liveRows); got != n {
			return fmt.Errorf("%d live rows, want %d", got, n)
		}
		return nil
	})
	changes := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`)

	// Two resyncs of an unchanged namespace: no row written.
	resyncs := func() int { return strings.Count(d.log(), "relisting on request") }
	before := resyncs()
	eventually(t, 60*time.Second, func() error {
		if r := resyncs(); r < before+2 {
			return fmt.Errorf("%d resyncs so far", r-before)
		}
		return nil
	})
	waitSynced(t, dsn)
	if got := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`); got != changes {
		t.Errorf("unchanged resyncs wrote %d changes rows, want none", got-changes)
	}

	// Behind kube-cdc's back: one row edited, one deleted.
	if _, err := conn.Exec(ctx, `UPDATE kube_cdc.objects SET object = jsonb_set(object, '{data,v}', '"hand"')
		WHERE namespace = $1 AND name = 'cm-1'`, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM kube_cdc.objects WHERE namespace = $1 AND name = 'cm-2'`, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		var v string
		if err := conn.QueryRow(ctx, `SELECT coalesce(object->'data'->>'v', '<none>') FROM kube_cdc.objects
			WHERE namespace = $1 AND name = 'cm-1'`, ns).Scan(&v); err != nil {
			return err
		}
		if v != "1" {
			return fmt.Errorf("cm-1 holds data.v %q", v)
		}
		if got := count(t, conn, liveRows); got != n {
			return fmt.Errorf("%d live rows, want %d (cm-2 not restored)", got, n)
		}
		return nil
	})
	log := d.log()
	if !strings.Contains(log, "drift:") || !strings.Contains(log, ns+"/cm-1") || !strings.Contains(log, ns+"/cm-2") {
		t.Errorf("no drift warn line naming %s/cm-1 and %s/cm-2:\n%s", ns, ns, log)
	}
	samples := opsScrape(t, addr)
	for kind, want := range map[string]float64{"edited": 1, "missing": 1} {
		if got, _ := opsMetric(samples, "kube_cdc_drift_total", map[string]string{"sink": "warehouse", "resource": "configmaps", "kind": kind}); got != want {
			t.Errorf("kube_cdc_drift_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}

	// resnapshot through the running daemon: nothing changed, nothing written; with --full,
	// every object.
	changes = count(t, conn, `SELECT count(*) FROM kube_cdc.changes`)
	out := resnapshotCLI(t, cfg, "configmaps")
	if !regexpRow(out, n, 0) {
		t.Errorf("resnapshot printed\n%s\nwant a row for warehouse/configmaps with %d listed and 0 written", out, n)
	}
	// The scope reads as status shows it (issue 24), not as the digest checkpoints key it by.
	if scope := scopeOfRow(out); scope != "namespace="+ns {
		t.Errorf("resnapshot printed\n%s\nwant the configmaps row's SCOPE namespace=%s, as status shows it; got %q", out, ns, scope)
	}
	if got := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`); got != changes {
		t.Errorf("a resnapshot of unchanged objects wrote %d changes rows, want none", got-changes)
	}
	if out := resnapshotCLI(t, cfg, "--full"); !regexpRow(out, n, n) {
		t.Errorf("resnapshot --full printed\n%s\nwant %d listed and %d written", out, n, n)
	}
	// In PostgreSQL objects is the state: --full rewrites no unchanged row, and changes
	// records each version once, whatever op it was first seen as: every current version
	// is there already, so --full adds no row (docs/architecture.md, "--full per sink").
	if got := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`); got != changes {
		t.Errorf("resnapshot --full of recorded versions added %d changes rows, want none", got-changes)
	}
	changes = count(t, conn, `SELECT count(*) FROM kube_cdc.changes`)
	var rowsBefore string
	if err := conn.QueryRow(ctx, `SELECT string_agg(name || updated_at::text, ',' ORDER BY name) FROM kube_cdc.objects WHERE namespace = $1`, ns).Scan(&rowsBefore); err != nil {
		t.Fatal(err)
	}
	if out := resnapshotCLI(t, cfg, "--full"); !regexpRow(out, n, n) {
		t.Errorf("a second resnapshot --full printed\n%s\nwant %d listed and %d written", out, n, n)
	}
	if got := count(t, conn, `SELECT count(*) FROM kube_cdc.changes`); got != changes {
		t.Errorf("a second --full added %d changes rows, want none", got-changes)
	}
	var rowsAfter string
	if err := conn.QueryRow(ctx, `SELECT string_agg(name || updated_at::text, ',' ORDER BY name) FROM kube_cdc.objects WHERE namespace = $1`, ns).Scan(&rowsAfter); err != nil {
		t.Fatal(err)
	}
	if rowsAfter != rowsBefore {
		t.Errorf("--full rewrote unchanged objects rows: updated_at %s, then %s", rowsBefore, rowsAfter)
	}

	// A request the daemon fails prints its error on stderr and no table on stdout: there
	// is nothing to show (issue 24).
	cmd := exec.Command(binary, "resnapshot", "-c", cfg, "--timeout", "60s", "nosuchthings")
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kube.Kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), `resource "nosuchthings" is not streamed`) || stdout.Len() != 0 {
		t.Errorf("resnapshot of a resource not streamed: exit %d (%v), want 1, nothing on stdout and the reason on stderr; stdout:\n%s\nstderr:\n%s", code, err, stdout.String(), stderr.String())
	}
}

// scopeOfRow is the SCOPE of the configmaps row resnapshot printed in out ("" for none).
func scopeOfRow(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 6 && f[1] == "configmaps" {
			return f[2]
		}
	}
	return ""
}

// resnapshotCLI runs `kube-cdc resnapshot` with cfg and returns its output.
func resnapshotCLI(t *testing.T, cfg string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"resnapshot", "-c", cfg, "--timeout", "120s"}, args...)...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kube.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kube-cdc resnapshot %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// regexpRow reports whether out has a configmaps row with these listed and written counts.
func regexpRow(out string, listed, written int) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "configmaps" && f[3] == fmt.Sprint(listed) && f[4] == fmt.Sprint(written) {
			return true
		}
	}
	return false
}

// With the kafka checkpoint store the key index is the data topic itself: a key
// tombstoned there behind kube-cdc's back (a null-value record produced by another
// client, as a cleanup script or a compaction of a wrongly deleted key would leave) is
// missing from the sink, and the next resync produces its object again as a snapshot
// record, logged and counted as drift "missing". Resyncs before it, and of the other
// keys, produce nothing.
func TestAKeyTombstonedInKafkaBehindKubeCDCsBackIsRestoredByTheNextResyncWithTheKafkaCheckpointStore(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns, sig := namespace(t, "kdrift"), namespace(t, "kdrift-sig")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	const n = 5
	for i := range n {
		cm.create(fmt.Sprintf("cm-%d", i), "0")
	}
	addr := opsFreeAddr(t)
	yaml := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: "{type: kafka, topic: e2e.offsets}",
		extra: fmt.Sprintf("pipeline:\n  resync: 2s\nleaderElection:\n  namespace: %s\n  name: kube-cdc-kdrift\n", sig)}.yaml()
	yaml = strings.Replace(yaml, "metrics:\n  address: \"\"", fmt.Sprintf("metrics:\n  address: %q", addr), 1)
	d := start(t, "run", "-c", writeConfig(t, yaml))
	listed := listedConfigMaps(t, ns)
	before := waitFor(t, k, kafkaTopic, 60*time.Second, snapshotOf(listed))

	resyncs := func() int { return strings.Count(d.log(), "relisting on request") }
	eventually(t, 60*time.Second, func() error {
		if r := resyncs(); r < 2 {
			return fmt.Errorf("%d resyncs so far", r)
		}
		return nil
	})
	if recs := since(before, mustRead(t, k, kafkaTopic)); len(recs) != 0 {
		t.Fatalf("resyncs of unchanged objects produced %d records: %v", len(recs), recs)
	}

	victim := ns + "/cm-1"
	w := &kafka.Writer{Addr: kafka.TCP(k.Addr()), Topic: kafkaTopic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(victim), Value: nil}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, rv, _ := strings.Cut(listed[victim], "@")
	var recs []record
	eventually(t, 60*time.Second, func() error {
		recs = since(before, mustRead(t, k, kafkaTopic))
		for i, r := range recs {
			if r.key == victim && r.tombstone() {
				for _, after := range recs[i+1:] {
					if after.key == victim && after.op == "r" && after.rv == rv {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no snapshot record of %s at %s after the tombstone: %v", victim, rv, recs)
	})
	for _, r := range recs {
		if r.key != victim {
			t.Errorf("the resyncs produced %v, of a key nobody touched", r)
		}
	}
	if n := countRecords(recs, func(r record) bool { return r.key == victim && !r.tombstone() }); n != 1 {
		t.Errorf("%d records of %s after the tombstone, want exactly one snapshot: %v", n, victim, recs)
	}
	log := d.log()
	if !strings.Contains(log, "drift:") || !strings.Contains(log, victim) {
		t.Errorf("no drift warn line naming %s:\n%s", victim, log)
	}
	if got, _ := opsMetric(opsScrape(t, addr), "kube_cdc_drift_total", map[string]string{"sink": "stream", "resource": "configmaps", "kind": "missing"}); got != 1 {
		t.Errorf(`kube_cdc_drift_total{kind="missing"} = %v, want 1`, got)
	}
	stopOK(t, d)
}
