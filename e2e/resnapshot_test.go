package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/signal"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Issue 10, resnapshot on demand: `kube-cdc resnapshot` reaches whichever replica leads,
// through the signal ConfigMap both replicas' configs name, and `--full` writes every
// object again as a snapshot.

// resnapshotJSON runs `kube-cdc resnapshot -o json` with cfg and returns the answer.
func resnapshotJSON(t *testing.T, cfg string, args ...string) signal.Result {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"resnapshot", "-c", cfg, "--timeout", "90s", "-o", "json"}, args...)...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kube.Kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kube-cdc resnapshot %v: %v\n%s%s", args, err, out, stderr)
	}
	var res signal.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("resnapshot -o json printed something else than a result: %v\n%s", err, out)
	}
	return res
}

// outcomeOf returns res's outcome for sink/configmaps, failing the test when there is none
// or more than one.
func outcomeOf(t *testing.T, res signal.Result, sink string) signal.Outcome {
	t.Helper()
	var found []signal.Outcome
	for _, o := range res.Outcomes {
		if o.Sink == sink && o.Resource == "configmaps" {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("resnapshot answered %+v; want one outcome for %s/configmaps", res, sink)
	}
	return found[0]
}

// Two replicas share a Lease and a database. A resnapshot asked with the standby's config
// is answered by the leader alone (the standby does not even read requests), and repairs
// a row edited by hand; a request made while the leader is dead and nobody leads yet, with
// the dead leader's config, is answered by its successor once it leads.
func TestAResnapshotAskedWithTheStandbysConfigIsAnsweredByTheLeaderAndOneAskedWhileNobodyLeadsByTheNextLeader(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns, sig := namespace(t, "rsnap"), namespace(t, "rsnap-sig")
	dsn := pg.NewDatabase(t)
	const n = 5
	for i := range n {
		if _, err := kube.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The Lease and the signal ConfigMap live outside the streamed namespace, or each
	// request would be a change of its own.
	config := func(identity string) string {
		return writeConfig(t, opsConfigYAML(dsn, ns, "", leaderElectionYAML(sig, "kube-cdc-rsnap", identity)))
	}
	cfgA, cfgB := config("replica-a"), config("replica-b")
	a := start(t, "run", "-c", cfgA)
	opsWaitLog(t, a, "became the leader", 30*time.Second)
	waitSynced(t, dsn)
	b := start(t, "run", "-c", cfgB)
	opsWaitLog(t, b, "campaigning for the lease", 30*time.Second)

	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `UPDATE kube_cdc.objects SET object = jsonb_set(object, '{data,v}', '"hand"')
		WHERE namespace = $1 AND name = 'cm-1'`, ns); err != nil {
		t.Fatal(err)
	}
	res := resnapshotJSON(t, cfgB, "configmaps")
	if res.By != "replica-a" || res.State != signal.StateDone {
		t.Errorf("asked with the standby's config, the request was answered by %q (state %q), want replica-a, done", res.By, res.State)
	}
	o := outcomeOf(t, res, "warehouse")
	if o.Listed != n || o.Written != 1 || o.Drift[pipeline.DriftEdited] != 1 {
		t.Errorf("outcome %+v; want %d listed, 1 written (the row edited by hand), drift edited=1", o, n)
	}
	var v string
	if err := conn.QueryRow(ctx, `SELECT object->'data'->>'v' FROM kube_cdc.objects WHERE namespace = $1 AND name = 'cm-1'`, ns).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "1" {
		t.Errorf("the row edited by hand holds data.v %q after the resnapshot, want the cluster's %q", v, "1")
	}
	if strings.Contains(b.log(), "resnapshot requested") {
		t.Errorf("the standby acted on the request:\n%s", b.log())
	}

	// The leader dies; the request is made before the standby leads, with the dead
	// leader's config: the new leader answers it.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if strings.Contains(b.log(), "became the leader") {
		t.Fatal("the standby led before the request was made; the test wants the request to wait for a leader")
	}
	res = resnapshotJSON(t, cfgA, "--full")
	if res.By != "replica-b" || res.State != signal.StateDone {
		t.Errorf("asked while nobody led, the request was answered by %q (state %q), want replica-b, done", res.By, res.State)
	}
	if o := outcomeOf(t, res, "warehouse"); o.Listed != n || o.Written != n {
		t.Errorf("--full outcome %+v; want %d listed and %d written", o, n, n)
	}
	cm, err := kube.Clientset().CoreV1().ConfigMaps(sig).Get(ctx, signal.ConfigMapName("kube-cdc-rsnap"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 0 {
		t.Errorf("the signal ConfigMap keeps %v after both requests were answered; the CLI removes what it wrote", cm.Data)
	}
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("the new leader's exit code %d after SIGTERM, want 0", code)
	}
}

// On a Kafka sink a resnapshot of unchanged objects produces nothing, and --full produces
// exactly one snapshot record ("r", source.snapshot true) per object, at its current
// version, before the command returns.
func TestAResnapshotWritesNothingToKafkaAndWithFullOneSnapshotRecordPerObject(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns, sig := namespace(t, "rsnapk"), namespace(t, "rsnapk-sig")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	const n = 6
	for i := range n {
		cm.create(fmt.Sprintf("cm-%d", i), "0")
	}
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db")),
		extra: fmt.Sprintf("leaderElection:\n  namespace: %s\n  name: kube-cdc-full\n", sig)}.write(t)
	d := start(t, "run", "-c", cfg)
	listed := listedConfigMaps(t, ns)
	before := waitFor(t, k, kafkaTopic, 60*time.Second, snapshotOf(listed))

	res := resnapshotJSON(t, cfg, "configmaps")
	if o := outcomeOf(t, res, "stream"); o.Listed != n || o.Written != 0 || o.Deleted != 0 {
		t.Errorf("resnapshot outcome %+v; want %d listed, nothing written", o, n)
	}
	if recs := since(before, mustRead(t, k, kafkaTopic)); len(recs) != 0 {
		t.Errorf("a resnapshot of unchanged objects produced %d records: %v", len(recs), recs)
	}

	res = resnapshotJSON(t, cfg, "--full")
	if o := outcomeOf(t, res, "stream"); o.Listed != n || o.Written != n || o.Deleted != 0 {
		t.Errorf("resnapshot --full outcome %+v; want %d listed and %d written", o, n, n)
	}
	recs := since(before, mustRead(t, k, kafkaTopic))
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.key]++
		uidRV := listed[r.key]
		uid, rv, _ := strings.Cut(uidRV, "@")
		if r.tombstone() || r.op != "r" || !r.env.Source.Snapshot || r.rv != rv || r.env.Source.UID != uid {
			t.Errorf("--full produced %v (snapshot %v), want an r record of %s at its current version %s", r, r.env != nil && r.env.Source.Snapshot, r.key, uidRV)
		}
	}
	for key := range listed {
		if seen[key] != 1 {
			t.Errorf("--full produced %d records of %s, want 1", seen[key], key)
		}
	}
	if len(recs) != n {
		t.Errorf("--full produced %d records, want %d: %v", len(recs), n, recs)
	}
	stopOK(t, d)
}

// Found by the soak (issue 24): after an etcd restore under a running daemon, a resnapshot
// asked was never answered. The daemon's watch of the signal ConfigMap resumed from a
// resource version the restored cluster had gone back below, and delivered nothing. The
// signals are now also read every signal.PollInterval, so the request is answered.
func TestAResnapshotAskedAfterAnEtcdRestoreUnderARunningDaemonIsAnswered(t *testing.T) {
	t.Parallel() // a control plane of its own: it restores etcd
	k := privatePlane(t)
	cs := k.Clientset()
	ctx := context.Background()
	ns, sig := namespace(t, "rr"), namespace(t, "rr-sig")
	for _, n := range []string{"a", "b", "c"} {
		setData(t, cs, ns, n, "1")
	}
	backup, err := k.BackupEtcd(ctx) // before the signal ConfigMap exists
	if err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	cfg := writeConfig(t, opsConfigYAML(dsn, ns, "", fmt.Sprintf("leaderElection:\n  namespace: %s\n  name: kube-cdc-rr\n", sig)))
	d := start(t, "run", "-c", cfg)
	waitSynced(t, dsn)
	if out := resnapshotCLI(t, cfg, "configmaps"); !regexpRow(out, 3, 0) {
		t.Fatalf("resnapshot before the restore printed\n%s\nwant a row with 3 listed, 0 written", out)
	}
	// The signal watch is now past the backup; more writes put it further.
	for i := range 20 {
		setData(t, cs, ns, "a", fmt.Sprintf("2-%d", i))
	}
	if err := k.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	out := resnapshotCLI(t, cfg, "configmaps")
	if !regexpRow(out, 3, 0) && !regexpRow(out, 3, 3) {
		t.Errorf("resnapshot after the restore printed\n%s\nwant a row for configmaps with 3 listed", out)
	}
	stillRunning(t, d)
	stopOK(t, d)
}
