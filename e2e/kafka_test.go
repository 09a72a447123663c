package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Every Kafka test runs its own in-process broker (testenv.NewKafka), so topics are never
// shared between tests; the cluster is "e2e" and the ConfigMaps topic is therefore
// kube.e2e.core.configmaps (design §5: "core" for the empty group).
const kafkaTopic = "kube.e2e.core.configmaps"

// kafkaCfg describes a config with one kafka sink streaming the ConfigMaps of one namespace.
type kafkaCfg struct {
	brokers    string
	ns         string
	kafka      string // extra lines of the sink's kafka block, each indented by 6 spaces
	checkpoint string // the sink's checkpoint block as a YAML flow map
	noCreate   bool   // createTopics: false
	sinks      string // more sinks, as YAML list items indented by 2 spaces
	extra      string // more top-level YAML
}

func (c kafkaCfg) yaml() string {
	return fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
    namespaces: [%s]
sinks:
  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      createTopics: %v
%s    checkpoint: %s
%smetrics:
  address: ""
log:
  level: debug
%s`, kube.Kubeconfig, c.ns, c.brokers, !c.noCreate, c.kafka, c.checkpoint, c.sinks, c.extra)
}

func (c kafkaCfg) write(t *testing.T) string {
	t.Helper()
	return writeConfig(t, c.yaml())
}

// fileCheckpoint is a file checkpoint block in a directory of the test's.
func fileCheckpoint(path string) string {
	return fmt.Sprintf("{type: file, path: %q}", path)
}

// envelope is the record value of design §5.
type envelope struct {
	Op     string          `json:"op"`
	TsMs   int64           `json:"ts_ms"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Source struct {
		Cluster         string `json:"cluster"`
		Group           string `json:"group"`
		Version         string `json:"version"`
		Resource        string `json:"resource"`
		Kind            string `json:"kind"`
		Namespace       string `json:"namespace"`
		Name            string `json:"name"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
		Snapshot        bool   `json:"snapshot"`
		Inferred        bool   `json:"inferred"`
		Reason          string `json:"reason"`
		Epoch           int    `json:"epoch"`
		ChangedBy       string `json:"changedBy"`
	} `json:"source"`
}

// record is one record of a data topic.
type record struct {
	m                kafka.Message
	key              string
	op, rv, resource string    // headers
	env              *envelope // nil for a tombstone (null value)
}

func (r record) tombstone() bool { return r.m.Value == nil }

// id is what identifies a record for deduplication: key, op, RV, and whether it is the
// tombstone that follows a delete.
func (r record) id() string {
	if r.tombstone() {
		return r.key + " tombstone@" + r.rv
	}
	return r.key + " " + r.op + "@" + r.rv
}

func (r record) String() string {
	return fmt.Sprintf("%d/%d %s", r.m.Partition, r.m.Offset, r.id())
}

func rvOf(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// readRecords reads the whole topic (partition by partition, in offset order).
func readRecords(k *testenv.Kafka, topic string) ([]record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs, err := k.ReadAll(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]record, 0, len(msgs))
	for _, m := range msgs {
		r := record{m: m, key: string(m.Key)}
		for _, h := range m.Headers {
			switch h.Key {
			case "kube-cdc.op":
				r.op = string(h.Value)
			case "kube-cdc.rv":
				r.rv = string(h.Value)
			case "kube-cdc.resource":
				r.resource = string(h.Value)
			}
		}
		if m.Value != nil {
			r.env = &envelope{}
			if err := json.Unmarshal(m.Value, r.env); err != nil {
				return nil, fmt.Errorf("%d/%d: value is not an envelope: %v: %s", m.Partition, m.Offset, err, m.Value)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func mustRead(t *testing.T, k *testenv.Kafka, topic string) []record {
	t.Helper()
	recs, err := readRecords(k, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// change is an expected change: a record with this key, op and RV. A delete's RV is not
// known to the client; rv is then the object's last RV and the record's must be above it.
type change struct {
	key, op string
	rv      uint64
}

func (c change) String() string { return fmt.Sprintf("%s %s@%d", c.key, c.op, c.rv) }

func (c change) matches(r record) bool {
	if r.tombstone() || r.key != c.key || r.op != c.op {
		return false
	}
	if c.op == "d" {
		return rvOf(r.rv) > c.rv
	}
	return rvOf(r.rv) == c.rv
}

// missing returns the expected changes that recs lack.
func missing(recs []record, want []change) []change {
	var out []change
	for _, w := range want {
		if !slices.ContainsFunc(recs, w.matches) {
			out = append(out, w)
		}
	}
	return out
}

// waitFor polls the topic until every expected change is in it and returns its records.
func waitFor(t *testing.T, k *testenv.Kafka, topic string, timeout time.Duration, want []change) []record {
	t.Helper()
	var recs []record
	eventually(t, timeout, func() error {
		var err error
		if recs, err = readRecords(k, topic); err != nil {
			return err
		}
		if m := missing(recs, want); len(m) > 0 {
			var ofKey []string
			for _, r := range recs {
				if r.key == m[0].key {
					ofKey = append(ofKey, r.String())
				}
			}
			return fmt.Errorf("%d of %d changes missing from %s, e.g. %v; the records of its key: %v", len(m), len(want), topic, m[0], ofKey)
		}
		return nil
	})
	return recs
}

// checkRecords checks what design §5 promises of every record and of every key's
// sequence: headers agree with the envelope, source names the object, r is a snapshot,
// deletes carry the last state in before (null when inferred) and are followed at once
// by a null-value tombstone with the same key and headers, a key's records are on one
// partition, and, duplicates aside, a key's RVs never go down.
func checkRecords(t *testing.T, recs []record, ns string) {
	t.Helper()
	at := map[[2]int64]record{}
	for _, r := range recs {
		at[[2]int64{int64(r.m.Partition), r.m.Offset}] = r
	}
	partition := map[string]int{}
	newest := map[string]uint64{}
	seen := map[string]bool{}
	for _, r := range recs {
		if p, ok := partition[r.key]; ok && p != r.m.Partition {
			t.Errorf("%v: key on partition %d and %d", r, p, r.m.Partition)
		}
		partition[r.key] = r.m.Partition
		if r.resource != "configmaps" {
			t.Errorf("%v: kube-cdc.resource %q, want configmaps", r, r.resource)
		}
		if !slices.Contains([]string{"c", "u", "d", "r"}, r.op) || r.rv == "" {
			t.Errorf("%v: headers op=%q rv=%q", r, r.op, r.rv)
		}
		ns2, name, _ := strings.Cut(r.key, "/")
		if ns2 != ns || name == "" {
			t.Errorf("%v: key is not %s/<name>", r, ns)
		}
		if r.tombstone() {
			prev, ok := at[[2]int64{int64(r.m.Partition), r.m.Offset - 1}]
			if !ok || prev.tombstone() || prev.op != "d" || prev.key != r.key || prev.rv != r.rv {
				t.Errorf("%v: a tombstone not right after the delete record of its key (before it: %v)", r, prev)
			}
		} else {
			e := r.env
			s := e.Source
			if e.Op != r.op || s.ResourceVersion != r.rv {
				t.Errorf("%v: envelope op %q rv %q disagree with the headers", r, e.Op, s.ResourceVersion)
			}
			if s.Cluster != "e2e" || s.Group != "" || s.Version != "v1" || s.Resource != "configmaps" || s.Kind != "ConfigMap" ||
				s.Namespace != ns2 || s.Name != name || s.UID == "" {
				t.Errorf("%v: source %+v does not name the object", r, s)
			}
			if s.Snapshot != (e.Op == "r") {
				t.Errorf("%v: op %s with source.snapshot=%v", r, e.Op, s.Snapshot)
			}
			if e.TsMs <= 0 || e.TsMs != r.m.Time.UnixMilli() {
				t.Errorf("%v: ts_ms %d, record time %v", r, e.TsMs, r.m.Time)
			}
			state := e.After
			if e.Op == "d" {
				state = e.Before
				if string(e.After) != "null" {
					t.Errorf("%v: a delete with after=%s", r, e.After)
				}
				next, ok := at[[2]int64{int64(r.m.Partition), r.m.Offset + 1}]
				if !ok || !next.tombstone() || next.key != r.key || next.op != "d" || next.rv != r.rv {
					t.Errorf("%v: not followed by a null-value tombstone with the same key and headers (next: %v)", r, next)
				}
			} else if string(e.Before) != "null" {
				t.Errorf("%v: before=%s, want null", r, e.Before)
			}
			if e.Op == "d" && s.Inferred {
				if string(state) != "null" {
					t.Errorf("%v: an inferred delete with before=%s, want null (never observed)", r, state)
				}
			} else {
				var obj struct {
					Metadata struct{ Name, Namespace, UID, ResourceVersion string }
				}
				if err := json.Unmarshal(state, &obj); err != nil || obj.Metadata.Name != name || obj.Metadata.Namespace != ns2 ||
					obj.Metadata.UID != s.UID || obj.Metadata.ResourceVersion != r.rv {
					t.Errorf("%v: object %.200s does not match the source (err %v)", r, state, err)
				}
			}
		}
		if seen[r.id()] {
			continue // a re-emit; checkReemits compares it with the first copy
		}
		seen[r.id()] = true
		rv := rvOf(r.rv)
		if rv < newest[r.key] || (rv == newest[r.key] && !r.tombstone()) {
			t.Errorf("%v: RV %d after %d of the same key", r, rv, newest[r.key])
		}
		newest[r.key] = rv
	}
}

// checkReemits checks that every record whose (key, op, RV) appeared before is a
// byte-identical copy of the first one: key, value, headers and timestamp (design §3:
// "duplicates are exact re-emits").
func checkReemits(t *testing.T, recs []record) (reemits int) {
	t.Helper()
	first := map[string]record{}
	for _, r := range recs {
		f, ok := first[r.id()]
		if !ok {
			first[r.id()] = r
			continue
		}
		reemits++
		if !bytes.Equal(f.m.Value, r.m.Value) || !f.m.Time.Equal(r.m.Time) || !slices.EqualFunc(f.m.Headers, r.m.Headers,
			func(a, b kafka.Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			how := "differs beyond ts_ms and the record timestamp"
			if f.env == nil && r.env == nil && !f.m.Time.Equal(r.m.Time) {
				how = "differs only in the record timestamp (observation time, stamped anew by the restarted daemon)"
			} else if f.env != nil && r.env != nil {
				a, b := *f.env, *r.env
				a.TsMs, b.TsMs = 0, 0
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				if bytes.Equal(ja, jb) {
					how = "differs only in ts_ms and the record timestamp (observation time, stamped anew by the restarted daemon)"
				}
			}
			t.Errorf("%v re-emits %v but is not byte-identical: %s\n  first: time %v %s\n  again: time %v %s",
				r, f, how, f.m.Time.UnixMilli(), f.m.Value, r.m.Time.UnixMilli(), r.m.Value)
		}
	}
	return reemits
}

// cmClient writes the ConfigMaps of one namespace and returns the RVs the apiserver gave.
type cmClient struct {
	t  *testing.T
	ns string
	c  typedcorev1.ConfigMapInterface
}

func configMaps(t *testing.T, ns string) cmClient {
	return cmClient{t: t, ns: ns, c: kubeFor(t).Clientset().CoreV1().ConfigMaps(ns)}
}

func (m cmClient) key(name string) string { return m.ns + "/" + name }

func (m cmClient) create(name, v string) change {
	m.t.Helper()
	c, err := m.c.Create(context.Background(), configMap(m.ns, name, map[string]string{"v": v}), metav1.CreateOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	return change{m.key(name), "c", rvOf(c.ResourceVersion)}
}

func (m cmClient) update(name, v string) change {
	m.t.Helper()
	c, err := m.c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	if c.Data["v"] == v {
		m.t.Fatalf("update %s: v is %q already; the apiserver would not change it", name, v)
	}
	c.Data = map[string]string{"v": v}
	if c, err = m.c.Update(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		m.t.Fatal(err)
	}
	return change{m.key(name), "u", rvOf(c.ResourceVersion)}
}

// delete deletes the object; the change's RV is its last RV before the delete.
func (m cmClient) delete(name string) change {
	m.t.Helper()
	c, err := m.c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	if err := m.c.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		m.t.Fatal(err)
	}
	return change{m.key(name), "d", rvOf(c.ResourceVersion)}
}

// snapshotOf is the r record expected for every listed object.
func snapshotOf(listed map[string]string) []change {
	var out []change
	for key, v := range listed {
		_, rv, _ := strings.Cut(v, "@")
		out = append(out, change{key, "r", rvOf(rv)})
	}
	return out
}

func stopOK(t *testing.T, d *daemon) {
	t.Helper()
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, testenv.Tail(d.logPath, 30))
	}
}

func stillRunning(t *testing.T, d *daemon) {
	t.Helper()
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited (%v):\n%s", d.err, testenv.Tail(d.logPath, 30))
	default:
	}
}

// since returns the records of all that before lacks (by partition and offset).
func since(before, all []record) []record {
	old := map[[2]int64]bool{}
	for _, r := range before {
		old[[2]int64{int64(r.m.Partition), r.m.Offset}] = true
	}
	var out []record
	for _, r := range all {
		if !old[[2]int64{int64(r.m.Partition), r.m.Offset}] {
			out = append(out, r)
		}
	}
	return out
}

func countRecords(recs []record, f func(record) bool) int {
	n := 0
	for _, r := range recs {
		if f(r) {
			n++
		}
	}
	return n
}

func TestKafkaRecordsKeepPerKeyOrderCarryOpsHeadersAndTombstonesAndCompactToTheLatestState(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "k1")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	var want []change
	for _, name := range []string{"a", "b", "c"} {
		cm.create(name, "0")
	}
	want = append(want, snapshotOf(listedConfigMaps(t, ns))...)
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, kafka: "      partitions: 3\n",
		checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))}
	d := start(t, "run", "-c", cfg.write(t))
	waitFor(t, k, kafkaTopic, 60*time.Second, want)

	want = append(want,
		cm.update("a", "1"), cm.update("a", "2"),
		cm.create("d", "0"), cm.update("d", "1"),
		cm.delete("b"), cm.delete("d"),
		cm.update("c", "1"),
		cm.create("e", "0"),
		cm.create("b", "again"), // re-created: a new uid under the same key
		cm.update("a", "3"),
	)
	recs := waitFor(t, k, kafkaTopic, 30*time.Second, want)
	stopOK(t, d)
	recs = mustRead(t, k, kafkaTopic)
	checkRecords(t, recs, ns)
	if n := checkReemits(t, recs); n != 0 {
		t.Errorf("%d re-emits in a run without failures", n)
	}

	// Per key, exactly the expected sequence of ops, in RV order, each delete followed by
	// its tombstone.
	seqs := map[string][]string{}
	for _, r := range recs {
		s := r.op
		if r.tombstone() {
			s = "null"
		}
		seqs[r.key] = append(seqs[r.key], s)
	}
	wantSeqs := map[string]string{
		"a": "r u u u", "b": "r d null c", "c": "r u", "d": "c u d null", "e": "c",
	}
	for name, w := range wantSeqs {
		if got := strings.Join(seqs[cm.key(name)], " "); got != w {
			t.Errorf("key %s: ops %q, want %q", cm.key(name), got, w)
		}
	}
	if len(seqs) != len(wantSeqs) {
		t.Errorf("records of %d keys, want %d", len(seqs), len(wantSeqs))
	}
	if m := missing(recs, want); len(m) > 0 {
		t.Errorf("missing: %v", m)
	}
	var bUIDs []string
	for _, r := range recs {
		if r.key == cm.key("b") && !r.tombstone() && !slices.Contains(bUIDs, r.env.Source.UID) {
			bUIDs = append(bUIDs, r.env.Source.UID)
		}
	}
	if len(bUIDs) != 2 {
		t.Errorf("re-created b: uids %v, want two", bUIDs)
	}

	// Compaction. kfake (like Kafka) never cleans the last batch of a partition, so a
	// sentinel record written to every partition makes all of kube-cdc's records
	// cleanable. What Compact then guarantees: per key, only the record with the highest
	// offset remains; null-value tombstones younger than delete.retention.ms (default one
	// day) stay.
	w := k.Writer(kafkaTopic)
	w.Balancer = kafka.BalancerFunc(func(m kafka.Message, ps ...int) int {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Key), "sentinel-"))
		return ps[i]
	})
	var sentinels []kafka.Message
	for i := range 3 {
		sentinels = append(sentinels, kafka.Message{Key: []byte("sentinel-" + strconv.Itoa(i)), Value: []byte(`{"sentinel":true}`)})
	}
	if err := w.WriteMessages(ctx, sentinels...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := k.Compact(ctx, kafkaTopic); err != nil {
		t.Fatal(err)
	}
	live := listedConfigMaps(t, ns)
	checkCompacted := func(tombstonesExpired bool) {
		t.Helper()
		after := mustRead(t, k, kafkaTopic)
		got := map[string][]record{}
		for _, r := range after {
			got[r.key] = append(got[r.key], r)
		}
		for i := range 3 {
			if rs := got["sentinel-"+strconv.Itoa(i)]; len(rs) != 1 {
				t.Errorf("sentinel-%d: %d records", i, len(rs))
			}
		}
		for key, v := range live {
			rs := got[key]
			uid, rv, _ := strings.Cut(v, "@")
			if len(rs) != 1 || rs[0].tombstone() || rs[0].rv != rv || rs[0].env.Source.UID != uid {
				t.Errorf("live key %s after compaction: %v, want its one latest record at rv %s", key, rs, rv)
			}
		}
		rs := got[cm.key("d")]
		switch {
		case tombstonesExpired && len(rs) != 0:
			t.Errorf("deleted key d after compaction with delete.retention.ms=0: %v, want nothing", rs)
		case !tombstonesExpired && (len(rs) != 1 || !rs[0].tombstone()):
			t.Errorf("deleted key d after compaction: %v, want only its tombstone", rs)
		}
		if n := len(after); n != len(live)+3+map[bool]int{true: 0, false: 1}[tombstonesExpired] {
			t.Errorf("%d records after compaction, want one per key: %v", n, after)
		}
	}
	checkCompacted(false)

	// With delete.retention.ms=0 the tombstones go too, and the deleted key with them.
	client := &kafka.Client{Addr: kafka.TCP(k.Addr()), Transport: k.Transport(), Timeout: 10 * time.Second}
	res, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: kafkaTopic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "delete.retention.ms", Value: "0", ConfigOperation: kafka.ConfigOperationSet}},
	}}})
	if err == nil && len(res.Resources) == 1 {
		err = res.Resources[0].Error
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Compact(ctx, kafkaTopic); err != nil {
		t.Fatal(err)
	}
	checkCompacted(true)
}

func TestKafkaARestartResumesFromTheFileCheckpointAndReemitsOnlyExactCopies(t *testing.T) {
	ns := namespace(t, "k2")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	for i := range 5 {
		cm.create("cm-"+strconv.Itoa(i), "0")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: fileCheckpoint(state)}.write(t)
	want := snapshotOf(listedConfigMaps(t, ns))
	d := start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)
	stopOK(t, d)
	old := filepath.Join(dir, "old.db")
	copyFile(t, state, old)

	// Changes while stopped, then while running.
	want = append(want, cm.update("cm-0", "1"), cm.update("cm-1", "1"), cm.update("cm-1", "2"), cm.delete("cm-2"), cm.create("new", "0"))
	lists, err := kube.RequestCount(context.Background(), "LIST", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)
	want = append(want, cm.update("cm-3", "1"))
	waitFor(t, k, kafkaTopic, 30*time.Second, want)
	stopOK(t, d)
	if after, err := kube.RequestCount(context.Background(), "LIST", "configmaps"); err != nil || after-lists != probeLists(d.log()) {
		t.Errorf("the restart LISTed configmaps %v times (err %v), want only the %v one-object probes before watches: it should resume from the checkpoint",
			after-lists, err, probeLists(d.log()))
	}
	first := mustRead(t, k, kafkaTopic)
	if n := countRecords(first, func(r record) bool { return r.op == "r" }); n != 5 {
		t.Errorf("%d snapshot records after the restart, want the 5 of the first start only", n)
	}

	// Put back the checkpoint of the first stop: exactly a crash after the brokers
	// acknowledged everything since and before any of it was checkpointed. The restart
	// re-emits those changes, and each must be a byte-identical copy.
	copyFile(t, old, state)
	want = append(want, cm.update("cm-4", "1"))
	d = start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)
	stopOK(t, d)
	recs := mustRead(t, k, kafkaTopic)
	if m := missing(recs, want); len(m) > 0 {
		t.Errorf("missing: %v", m)
	}
	checkRecords(t, recs, ns)
	n := checkReemits(t, recs)
	if n == 0 {
		t.Errorf("no re-emits after rolling the checkpoint back: the test did not exercise them")
	}
	t.Logf("%d records, %d re-emits", len(recs), n)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestKafkaARestartAfterHistoryExpiredRelistsOnceAndWritesOnlyTheDifference(t *testing.T) {
	t.Parallel() // a control plane of its own: it expires etcd's history
	kube := privatePlane(t)
	ctx := context.Background()
	ns := namespace(t, "k3")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	for i := range 10 {
		cm.create("cm-"+strconv.Itoa(i), "0")
	}
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))}.write(t)
	d := start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, snapshotOf(listedConfigMaps(t, ns)))
	stopOK(t, d)
	before := mustRead(t, k, kafkaTopic)

	// While stopped: delete 3, change 2, leave 5 alone; then the history goes.
	deleted := []change{cm.delete("cm-0"), cm.delete("cm-1"), cm.delete("cm-2")}
	// A relist shows a changed object as a snapshot read (op r, design §5) at its new RV.
	changed := []change{cm.update("cm-3", "1"), cm.update("cm-4", "1")}
	for i := range changed {
		changed[i].op = "r"
	}
	if err := kube.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	all := waitFor(t, k, kafkaTopic, 60*time.Second, append(slices.Clone(deleted), changed...))
	// Stray records (for the unchanged objects) would come from Listed events, which
	// precede the RelistEnd that made the inferred deletes: they are in the same batch or
	// an earlier one, and the SIGTERM below waits for the batch being written.
	stopOK(t, d)
	all = mustRead(t, k, kafkaTopic)
	checkRecords(t, all, ns)
	checkReemits(t, all)
	if got := countRelists(d.log()); got != 1 {
		t.Errorf("%d relists in the second run, want 1", got)
	}
	added := since(before, all)
	for _, r := range added {
		if r.env != nil && r.op == "d" && !r.env.Source.Inferred {
			t.Errorf("%v: an unobserved delete without source.inferred=true", r)
		}
	}
	for _, w := range deleted {
		if n := countRecords(added, func(r record) bool { return r.key == w.key && r.tombstone() }); n != 1 {
			t.Errorf("%s: %d tombstones, want 1", w.key, n)
		}
	}
	if len(added) != 3*2+2 {
		t.Errorf("the restart wrote %d records, want 8 (3 inferred deletes and their tombstones, 2 changed objects; none for the 5 unchanged): %v",
			len(added), added)
	}
}

func TestKafkaABrokerOutageMidStreamLosesNothingAndTheDaemonKeepsRunning(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "k4")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	for i := range 5 {
		cm.create("cm-"+strconv.Itoa(i), "0")
	}
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db"))}.write(t)
	want := snapshotOf(listedConfigMaps(t, ns))
	d := start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)

	// Writes go on for ~10 s with the broker down, and a few more once it is back.
	stopped := time.Now()
	k.StopBroker()
	for i := 0; time.Since(stopped) < 10*time.Second; i++ {
		name := "cm-" + strconv.Itoa(i%5)
		switch i % 7 {
		case 3:
			want = append(want, cm.create("new-"+strconv.Itoa(i), "0"))
		case 6:
			want = append(want, cm.delete(name), cm.create(name, "i"+strconv.Itoa(i)))
		default:
			want = append(want, cm.update(name, "i"+strconv.Itoa(i)))
		}
		time.Sleep(300 * time.Millisecond)
	}
	stillRunning(t, d)
	if err := k.StartBroker(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, cm.update("cm-0", "after"))
	waitFor(t, k, kafkaTopic, 45*time.Second, want)
	stillRunning(t, d)
	if !strings.Contains(d.log(), "retrying") {
		t.Errorf("the log shows no retried write during the outage")
	}
	stopOK(t, d)
	recs := mustRead(t, k, kafkaTopic)
	checkRecords(t, recs, ns)
	n := checkReemits(t, recs)
	t.Logf("%d changes, %d records, %d re-emits", len(want), len(recs), n)
}

func TestKafkaAStoppedBrokerDoesNotHoldBackPostgresAndCatchesUpOnceItIsBack(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "k5")
	k := testenv.NewKafka(t)
	dsn := pg.NewDatabase(t)
	cm := configMaps(t, ns)
	for i := range 5 {
		cm.create("cm-"+strconv.Itoa(i), "0")
	}
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "state.db")),
		sinks: fmt.Sprintf("  - name: warehouse\n    type: postgres\n    postgres:\n      dsn: %q\n", dsn),
		// A small queue fills quickly, so the stalled Kafka sink is detached after
		// DetachAfter (10 s) instead of holding back the shared stream.
		extra: "pipeline:\n  buffer: 16\n",
	}.write(t)
	want := snapshotOf(listedConfigMaps(t, ns))
	d := start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)
	converges(t, dsn, "configmaps", func() map[string]string { return listedConfigMaps(t, ns) })

	k.StopBroker()
	stopped := time.Now()
	for i := range 60 {
		name := "cm-" + strconv.Itoa(i%5)
		if i%10 == 9 {
			want = append(want, cm.create("new-"+strconv.Itoa(i), "0"))
			continue
		}
		want = append(want, cm.update(name, "i"+strconv.Itoa(i)))
	}
	listed := listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return listed })
	t.Logf("Postgres converged %v after the broker stopped", time.Since(stopped).Round(100*time.Millisecond))
	if recs, err := readRecords(k, kafkaTopic); err == nil {
		t.Fatalf("the broker answered while stopped (%d records)", len(recs))
	}
	stillRunning(t, d)

	// Keep writing while it is down; Postgres follows each.
	want = append(want, cm.update("cm-0", "while-down"))
	listed = listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return listed })

	if err := k.StartBroker(ctx); err != nil {
		t.Fatal(err)
	}
	recs := waitFor(t, k, kafkaTopic, 45*time.Second, want)
	stillRunning(t, d)
	want = append(want, cm.update("cm-1", "after"))
	recs = waitFor(t, k, kafkaTopic, 30*time.Second, want)
	listed = listedConfigMaps(t, ns)
	converges(t, dsn, "configmaps", func() map[string]string { return listed })
	stopOK(t, d)
	recs = mustRead(t, k, kafkaTopic)
	checkRecords(t, recs, ns)
	checkReemits(t, recs)
	conn := connect(t, dsn)
	if n := count(t, conn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = $1`, ns); n != len(want) {
		t.Errorf("%d changes rows in Postgres, want %d", n, len(want))
	}
}

// offsetsRV is the highest checkpoint in the kafka checkpoint store's topic.
func offsetsRV(k *testenv.Kafka, topic string) (uint64, error) {
	recs, err := readRecords(k, topic)
	if err != nil {
		return 0, err
	}
	var max uint64
	for _, r := range recs {
		var v struct{ ResourceVersion string }
		if json.Unmarshal(r.m.Value, &v) == nil && rvOf(v.ResourceVersion) > max {
			max = rvOf(v.ResourceVersion)
		}
	}
	return max, nil
}

func TestKafkaWithTheKafkaCheckpointStoreAKillDashNineResumesWithoutANewSnapshot(t *testing.T) {
	t.Parallel() // a control plane of its own: it expires etcd's history
	kube := privatePlane(t)
	ctx := context.Background()
	ns := namespace(t, "k6")
	k := testenv.NewKafka(t)
	cm := configMaps(t, ns)
	for i := range 20 {
		cm.create("cm-"+strconv.Itoa(i), "0")
	}
	const offsets = "e2e.offsets"
	cfg := kafkaCfg{brokers: k.Addr(), ns: ns, checkpoint: "{type: kafka, topic: " + offsets + "}"}.write(t)
	want := snapshotOf(listedConfigMaps(t, ns))
	d := start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, want)
	last := cm.update("cm-0", "1")
	want = append(want, last)
	waitFor(t, k, kafkaTopic, 30*time.Second, want)
	eventually(t, 30*time.Second, func() error {
		rv, err := offsetsRV(k, offsets)
		if err == nil && rv < last.rv {
			err = fmt.Errorf("checkpoint %d in %s, want >= %d", rv, offsets, last.rv)
		}
		return err
	})
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	// kube-cdc keeps no local state with the kafka store: the only file it could have
	// written is the default state file in its working directory.
	if _, err := os.Stat(filepath.Join(".", "kube-cdc-state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a local state file exists next to the daemon: %v", err)
	}

	// Changes while it is dead; then a restart with nothing but the broker.
	want = append(want, cm.update("cm-1", "1"), cm.delete("cm-2"), cm.create("new", "0"))
	d = start(t, "run", "-c", cfg)
	recs := waitFor(t, k, kafkaTopic, 60*time.Second, want)
	want = append(want, cm.update("cm-3", "1"))
	recs = waitFor(t, k, kafkaTopic, 30*time.Second, want)
	if n := countRecords(recs, func(r record) bool { return r.op == "r" }); n != 20 {
		t.Errorf("%d snapshot (r) records, want the 20 of the first start only", n)
	}
	if strings.Contains(d.log(), "relisted") {
		t.Errorf("the restart relisted instead of resuming from the kafka checkpoint")
	}

	// Once more, with the history gone meanwhile: the relist's key index comes from the
	// data topic, so the unchanged objects still get no records.
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	before := mustRead(t, k, kafkaTopic)
	changed := cm.update("cm-4", "2")
	changed.op = "r"
	gone := cm.delete("cm-5")
	if err := kube.ExpireHistory(ctx); err != nil {
		t.Fatal(err)
	}
	d = start(t, "run", "-c", cfg)
	waitFor(t, k, kafkaTopic, 60*time.Second, []change{changed, gone})
	stopOK(t, d) // as above: a stray record is written by the time the inferred delete is
	recs = mustRead(t, k, kafkaTopic)
	checkRecords(t, recs, ns)
	checkReemits(t, recs)
	if got := countRelists(d.log()); got != 1 {
		t.Errorf("%d relists after the history expired, want 1", got)
	}
	added := since(before, recs)
	if n := countRecords(recs, func(r record) bool { return r.op == "r" }); n != 20+1 {
		t.Errorf("%d snapshot (r) records, want 21: the first start's 20 and the changed cm-4", n)
	}
	if len(added) != 3 {
		t.Errorf("the relist wrote %d records, want 3 (cm-4 changed, cm-5's inferred delete and tombstone): %v", len(added), added)
	}
	for _, r := range added {
		if r.env != nil && r.op == "d" && !r.env.Source.Inferred {
			t.Errorf("%v: an unobserved delete without source.inferred=true", r)
		}
	}
}

func TestKafkaBadBrokersOrAMissingTopicFailWithOneLineNamingTheCause(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ns := namespace(t, "k7")
	configMaps(t, ns).create("one", "0") // something to write
	empty := namespace(t, "k7e")
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("127.0.0.1:%d", port)
	k := testenv.NewKafka(t)
	tests := []struct {
		name string
		cfg  kafkaCfg
		want []string
	}{
		{"unreachable brokers", kafkaCfg{brokers: dead, ns: ns, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "a.db"))}, []string{dead}},
		{"unreachable brokers with the kafka checkpoint store", kafkaCfg{brokers: dead, ns: ns, checkpoint: "{type: kafka}"}, []string{dead}},
		{"missing topic", kafkaCfg{brokers: k.Addr(), ns: ns, noCreate: true, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "b.db"))},
			[]string{"topic " + kafkaTopic, "does not exist"}},
		// Nothing to write yet: the missing topic must still fail the start, not the first
		// change hours later.
		{"missing topic of an empty namespace", kafkaCfg{brokers: k.Addr(), ns: empty, noCreate: true, checkpoint: fileCheckpoint(filepath.Join(t.TempDir(), "c.db"))},
			[]string{"topic " + kafkaTopic, "does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			began := time.Now()
			d := start(t, "run", "-c", tt.cfg.write(t))
			code, stderr := d.wait(30 * time.Second)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; stderr:\n%s", stderr)
			}
			last := lastLine(stderr)
			if !strings.HasPrefix(last, "kube-cdc: ") {
				t.Errorf("last line %q does not start with kube-cdc:", last)
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q does not contain %q", last, w)
				}
			}
			t.Logf("exit %d after %v: %s", code, time.Since(began).Round(100*time.Millisecond), last)
		})
	}
	// The missing topic stayed missing.
	if _, err := readRecords(k, kafkaTopic); err == nil || !strings.Contains(err.Error(), "nknown") {
		t.Errorf("reading %s: %v, want unknown topic", kafkaTopic, err)
	}
}
