package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Time travel (issue 12) as a Kafka consumer sees it: after an etcd restore, the compacted
// topic's latest record per key is the cluster as it is now, restored old versions
// included, and keys the restore took away end in a tombstone. Consumers order versions by
// (source.epoch, source.resourceVersion): the restored cluster issues its RVs again.

// kafkaLatest is "name uid rv v" of the latest record of every key of topic whose latest
// record is not a tombstone, sorted, and the latest record of each key.
func kafkaLatest(k *testenv.Kafka, topic string) ([]string, map[string]record, error) {
	recs, err := readRecords(k, topic)
	if err != nil {
		return nil, nil, err
	}
	latest := map[string]record{}
	for _, r := range recs { // one key is in one partition: offset order is its order
		latest[r.key] = r
	}
	var live []string
	for _, r := range latest {
		if r.tombstone() || r.env.Op == "d" {
			continue
		}
		var obj struct {
			Metadata struct {
				Name, UID, ResourceVersion string
			}
			Data map[string]string
		}
		if err := json.Unmarshal(r.env.After, &obj); err != nil {
			return nil, nil, fmt.Errorf("%v: after: %v", r, err)
		}
		live = append(live, fmt.Sprintf("%s %s %s %s", obj.Metadata.Name, obj.Metadata.UID, obj.Metadata.ResourceVersion, obj.Data["v"]))
	}
	slices.Sort(live)
	return live, latest, nil
}

// kafkaConverged waits until the topic's latest records of ns equal a fresh LIST, and
// returns the latest record of each key.
func kafkaConverged(t *testing.T, k *testenv.Kafka, cs kubernetes.Interface, ns string, d *daemon) map[string]record {
	t.Helper()
	var latest map[string]record
	eventually(t, 60*time.Second, func() error {
		select {
		case <-d.done:
			return fmt.Errorf("kube-cdc exited:\n%s", d.log())
		default:
		}
		live, l, err := kafkaLatest(k, kafkaTopic)
		if err != nil {
			return err
		}
		latest = l
		if want := travelListed(t, cs, ns); !slices.Equal(live, want) {
			return fmt.Errorf("the topic's latest records\n  %s\nwant a fresh LIST's\n  %s", strings.Join(live, "\n  "), strings.Join(want, "\n  "))
		}
		return nil
	})
	return latest
}

func headerValue(r record, key string) string {
	for _, h := range r.m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// An etcd restored from a backup while kube-cdc (a Kafka sink with the Kafka checkpoint
// store: no volume, no PostgreSQL) is down. The restored cluster has made fewer changes
// than the restore lost, so the server is behind the checkpoint at start.
func TestKafkaAfterAnEtcdRestoreTheTopicsLatestRecordsAreTheRestoredClusterInANewEpoch(t *testing.T) {
	t.Parallel() // a private control plane: it overlaps with the other time-travel tests only
	kc := testenv.NewKube(t, testenv.KubeOptions{})
	cs := kc.Clientset()
	ctx := context.Background()
	const ns = "kafka-travel"
	createNamespace(t, cs, ns)
	for _, n := range []string{"kept", "restored", "deleted-later"} {
		setData(t, cs, ns, n, "1")
	}
	k := testenv.NewKafka(t)
	cfg := writeConfig(t, strings.Replace(kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: "{type: kafka}"}.yaml(),
		kube.Kubeconfig, kc.Kubeconfig, 1))
	d := start(t, "run", "-c", cfg)
	kafkaConverged(t, k, cs, ns, d)

	backup, err := kc.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 { // lost by the restore: more than it makes before kube-cdc starts
		setData(t, cs, ns, "restored", fmt.Sprintf("2-lost-%d", i))
	}
	setData(t, cs, ns, "lost", "2-lost")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "deleted-later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kafkaConverged(t, k, cs, ns, d)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	before := map[int]int64{} // partition → the offset after its last record before the restore
	for _, r := range mustRead(t, k, kafkaTopic) {
		before[r.m.Partition] = r.m.Offset + 1
	}

	if err := kc.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	reused := setData(t, cs, ns, "new", "3") // an RV the lost changes had
	d = start(t, "run", "-c", cfg)
	latest := kafkaConverged(t, k, cs, ns, d)

	if r, ok := latest[ns+"/lost"]; !ok || !r.tombstone() {
		t.Errorf("the key the restore took away: latest record %v, want a tombstone", r)
	}
	if r := latest[ns+"/new"]; r.env == nil || r.rv != reused.ResourceVersion || r.env.Source.Epoch != 1 || headerValue(r, "kube-cdc.epoch") != "1" {
		t.Errorf("the object created after the restore at RV %s: latest record %v, want it in epoch 1 (source.epoch, header kube-cdc.epoch)", reused.ResourceVersion, r)
	}
	var recs []record
	for _, r := range mustRead(t, k, kafkaTopic) {
		if r.m.Offset >= before[r.m.Partition] {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		t.Fatal("no record after the restore")
	}
	for _, r := range recs {
		if r.env != nil && r.env.Source.Epoch != 1 || headerValue(r, "kube-cdc.epoch") != "1" {
			t.Errorf("%v: written after the restore in epoch %s (header), want 1", r, headerValue(r, "kube-cdc.epoch"))
		}
	}
	lines := writersLines(d.log(), "time travel: the cluster is behind what the sink holds")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "epoch=1") ||
		!strings.Contains(lines[0], "reason=list-below-checkpoint") || !strings.Contains(lines[0], "sink=stream") {
		t.Errorf("time travel lines, want one warning naming the sink, reason list-below-checkpoint and epoch 1:\n%s", strings.Join(lines, "\n"))
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
