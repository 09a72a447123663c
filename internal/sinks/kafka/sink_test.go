package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

var (
	deployments = change.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}
	nodes       = change.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}
	observed    = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fileStore(t *testing.T) checkpoint.Store {
	s, err := checkpoint.OpenFile(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newSink(t *testing.T, k *testenv.Kafka, opts Options) *Sink {
	t.Helper()
	opts.Brokers = []string{k.Addr()}
	s, err := New(testCtx(t), "stream", "prod", opts, fileStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func chg(res change.Resource, ns, name string, rv change.RV, op change.Op, obj string) change.Change {
	c := change.Change{
		Cluster: "prod", Resource: res, Key: change.Key{Namespace: ns, Name: name},
		UID: "uid-" + name, RV: rv, Op: op, ObservedAt: observed, ChangedBy: "kubectl/Update",
	}
	if obj != "" {
		c.Object = json.RawMessage(obj)
	}
	return c
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return "<missing>"
}

type decodedEnvelope struct {
	Op     string          `json:"op"`
	TsMs   int64           `json:"ts_ms"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Source map[string]any  `json:"source"`
}

func TestWriteProducesOneEnvelopePerChangeWithKeyOpHeadersAndADeleteTombstone(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 3})

	snap := chg(deployments, "ns", "snap", 10, change.OpCreate, `{"kind":"Deployment","v":"snap"}`)
	snap.Snapshot = true
	inferred := chg(deployments, "ns", "gone", 14, change.OpDelete, "")
	inferred.Inferred = true
	b := change.Batch{Resource: deployments, Checkpoint: 20, Changes: []change.Change{
		snap,
		chg(deployments, "ns", "web", 11, change.OpCreate, `{"v":1}`),
		chg(deployments, "ns", "web", 12, change.OpUpdate, `{"v":2}`),
		chg(deployments, "ns", "web", 13, change.OpDelete, `{"v":2,"deleted":true}`),
		inferred,
	}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]kafka.Message{}
	for _, m := range msgs {
		byKey[string(m.Key)] = append(byKey[string(m.Key)], m)
	}
	if len(msgs) != 7 {
		t.Fatalf("%d records, want 7 (5 changes + 2 tombstones): %v", len(msgs), byKey)
	}

	type want struct {
		op, rv, before, after string
		tombstone             bool
	}
	check := func(key string, wants []want) {
		t.Helper()
		got := byKey[key]
		if len(got) != len(wants) {
			t.Fatalf("key %s: %d records, want %d", key, len(got), len(wants))
		}
		for i, w := range wants {
			m := got[i]
			if header(m, HeaderOp) != w.op || header(m, HeaderRV) != w.rv || header(m, HeaderResource) != "deployments.apps" {
				t.Errorf("key %s record %d: headers %v", key, i, m.Headers)
			}
			if !m.Time.Equal(observed.Truncate(time.Millisecond)) {
				t.Errorf("key %s record %d: timestamp %v, want %v", key, i, m.Time, observed)
			}
			if w.tombstone {
				if m.Value != nil {
					t.Errorf("key %s record %d: value %s, want a null tombstone", key, i, m.Value)
				}
				continue
			}
			var e decodedEnvelope
			if err := json.Unmarshal(m.Value, &e); err != nil {
				t.Fatalf("key %s record %d: %v: %s", key, i, err, m.Value)
			}
			if e.Op != w.op || string(e.Before) != w.before || string(e.After) != w.after || e.TsMs != observed.UnixMilli() {
				t.Errorf("key %s record %d: %s", key, i, m.Value)
			}
			if e.Source["resourceVersion"] != w.rv || e.Source["name"] != strings.TrimPrefix(key, "ns/") ||
				e.Source["namespace"] != "ns" || e.Source["cluster"] != "prod" || e.Source["group"] != "apps" ||
				e.Source["version"] != "v1" || e.Source["resource"] != "deployments" || e.Source["kind"] != "Deployment" ||
				e.Source["uid"] != "uid-"+strings.TrimPrefix(key, "ns/") || e.Source["changedBy"] != "kubectl/Update" {
				t.Errorf("key %s record %d: source %v", key, i, e.Source)
			}
			if e.Source["snapshot"] != (w.op == "r") || e.Source["inferred"] != (key == "ns/gone") {
				t.Errorf("key %s record %d: snapshot/inferred %v", key, i, e.Source)
			}
		}
	}
	check("ns/snap", []want{{op: "r", rv: "10", before: "null", after: `{"kind":"Deployment","v":"snap"}`}})
	check("ns/web", []want{
		{op: "c", rv: "11", before: "null", after: `{"v":1}`},
		{op: "u", rv: "12", before: "null", after: `{"v":2}`},
		{op: "d", rv: "13", before: `{"v":2,"deleted":true}`, after: "null"},
		{op: "d", rv: "13", tombstone: true},
	})
	check("ns/gone", []want{{op: "d", rv: "14", before: "null", after: "null"}, {op: "d", rv: "14", tombstone: true}})

	if rv, err := s.Checkpoint(ctx, deployments); err != nil || rv != 20 {
		t.Errorf("checkpoint %v, %v; want 20", rv, err)
	}
	keys := map[string]change.Entry{}
	s.KeyIndex(ctx, deployments, func(k change.Key, e change.Entry) error { keys[k.String()] = e; return nil })
	if len(keys) != 1 || keys["ns/snap"] != (change.Entry{UID: "uid-snap", RV: 10}) {
		t.Errorf("key index %v, want only ns/snap", keys)
	}
}

func TestClusterScopedObjectsGoToTheCoreTopicKeyedByName(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 1})
	if err := s.Write(ctx, change.Batch{Resource: nodes, Checkpoint: 5, Changes: []change.Change{chg(nodes, "", "node-1", 5, change.OpUpdate, `{}`)}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.core.nodes")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || string(msgs[0].Key) != "node-1" || header(msgs[0], HeaderResource) != "nodes" {
		t.Fatalf("records %+v", msgs)
	}
}

func TestRecordsOfOneKeyStayInRVOrderOnOnePartitionAcrossManyChanges(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 6})
	const keys, versions, perBatch = 40, 25, 170
	var all []change.Change
	rv := change.RV(100)
	for v := range versions {
		for i := range keys {
			rv++
			all = append(all, chg(deployments, "ns", fmt.Sprintf("d%02d", i), rv, change.OpUpdate, fmt.Sprintf(`{"v":%d}`, v)))
		}
	}
	for i := 0; i < len(all); i += perBatch {
		end := min(i+perBatch, len(all))
		if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: all[end-1].RV, Changes: all[i:end]}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(all) {
		t.Fatalf("%d records, want %d", len(msgs), len(all))
	}
	last := map[string]change.RV{}
	part := map[string]int{}
	partitions := map[int]bool{}
	for _, m := range msgs {
		key := string(m.Key)
		r, _ := change.ParseRV(header(m, HeaderRV))
		if r <= last[key] {
			t.Fatalf("key %s: rv %v after %v", key, r, last[key])
		}
		last[key] = r
		if p, ok := part[key]; ok && p != m.Partition {
			t.Fatalf("key %s on partitions %d and %d", key, p, m.Partition)
		}
		part[key] = m.Partition
		partitions[m.Partition] = true
	}
	if len(partitions) < 2 {
		t.Errorf("all keys on %d partition(s); the hash balancer should spread them", len(partitions))
	}
}

func TestWriteWithTheBrokerStoppedFailsRetryablyKeepsTheCheckpointAndSucceedsAfterRestart(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 2})
	first := change.Batch{Resource: deployments, Checkpoint: 10, Changes: []change.Change{chg(deployments, "ns", "a", 10, change.OpCreate, `{}`)}}
	if err := s.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := change.Batch{Resource: deployments, Checkpoint: 12, Changes: []change.Change{
		chg(deployments, "ns", "a", 11, change.OpUpdate, `{"v":2}`),
		chg(deployments, "ns", "b", 12, change.OpCreate, `{}`),
	}}

	k.StopBroker()
	start := time.Now()
	err := s.Write(ctx, second)
	if err == nil {
		t.Fatal("Write with the broker stopped succeeded")
	}
	if retry.IsTerminal(err) {
		t.Fatalf("Write with the broker stopped returned a terminal error: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Write took %v to fail", d)
	}
	t.Logf("broker down: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if rv, _ := s.Checkpoint(ctx, deployments); rv != 10 {
		t.Fatalf("checkpoint moved to %v without an acknowledgement", rv)
	}
	// The versions held are those acknowledged; b, new, may have gone out before the
	// broker stopped answering, so it is noted at RV 0 (checkpoint.IntentStore).
	keys := map[string]change.Entry{}
	s.KeyIndex(ctx, deployments, func(k change.Key, e change.Entry) error { keys[k.String()] = e; return nil })
	if len(keys) != 2 || keys["ns/a"].RV != 10 || keys["ns/b"] != (change.Entry{UID: "uid-b"}) {
		t.Errorf("key index changed without an acknowledgement: %v", keys)
	}

	if err := k.StartBroker(ctx); err != nil {
		t.Fatal(err)
	}
	// The pipeline's retry: the same batch, with backoff, until it succeeds.
	err = retry.Do(ctx, retry.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}, nil, "write", func(ctx context.Context) error {
		return s.Write(ctx, second)
	})
	if err != nil {
		t.Fatalf("Write after the restart: %v", err)
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != 12 {
		t.Errorf("checkpoint %v, want 12", rv)
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range msgs {
		got[string(m.Key)+"@"+header(m, HeaderRV)] = true
	}
	for _, w := range []string{"ns/a@10", "ns/a@11", "ns/b@12"} {
		if !got[w] {
			t.Errorf("record %s missing; have %v", w, got)
		}
	}
}

func TestRewritingTheSameBatchProducesByteIdenticalRecords(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true, Partitions: 1})
	b := change.Batch{Resource: deployments, Checkpoint: 3, Changes: []change.Change{
		chg(deployments, "ns", "a", 1, change.OpCreate, `{"a":"\u00e9\n"}`),
		chg(deployments, "ns", "a", 2, change.OpUpdate, `{"a":2}`),
		chg(deployments, "ns", "a", 3, change.OpDelete, `{"a":2}`),
	}}
	for range 2 {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := k.ReadAll(ctx, "kube.prod.apps.deployments")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 8 {
		t.Fatalf("%d records, want 2×4", len(msgs))
	}
	for i := range 4 {
		a, b := msgs[i], msgs[i+4]
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil) ||
			!a.Time.Equal(b.Time) || fmt.Sprint(a.Headers) != fmt.Sprint(b.Headers) {
			t.Errorf("record %d differs from its re-emit:\n%+v\n%+v", i, a, b)
		}
	}
}

func TestAMissingTopicWithCreationOffIsATerminalErrorNamingIt(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{})
	err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 1, Changes: []change.Change{chg(deployments, "ns", "a", 1, change.OpCreate, `{}`)}})
	if err == nil || !retry.IsTerminal(err) || !strings.Contains(err.Error(), "kube.prod.apps.deployments") {
		t.Fatalf("error %v; want a terminal error naming kube.prod.apps.deployments", err)
	}
	// The pipeline asks for the checkpoint before it streams: the start fails there, even
	// when there is nothing to write yet.
	rv, err := s.Checkpoint(ctx, deployments)
	if rv != 0 {
		t.Errorf("checkpoint %v after a failed write", rv)
	}
	if err == nil || !retry.IsTerminal(err) || !strings.Contains(err.Error(), "kube.prod.apps.deployments") {
		t.Errorf("Checkpoint: error %v; want a terminal error naming kube.prod.apps.deployments", err)
	}
}

func TestCheckpointOnlyBatchesCommitWithoutRecords(t *testing.T) {
	ctx := testCtx(t)
	k := testenv.NewKafka(t)
	s := newSink(t, k, Options{CreateTopics: true}) // Checkpoint checks the topic
	if err := s.Write(ctx, change.Batch{Resource: deployments, Checkpoint: 77}); err != nil {
		t.Fatal(err)
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != 77 {
		t.Errorf("checkpoint %v, want 77", rv)
	}
}

func TestNewNamesTheBrokersWhenTheyAreUnreachable(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	_, err = New(testCtx(t), "stream", "prod", Options{Brokers: []string{addr}, WriteTimeout: 3 * time.Second}, checkpoint.None{}, nil)
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("error %v; want one naming %s", err, addr)
	}
	if retry.IsTerminal(err) {
		t.Errorf("unreachable brokers should be retryable: %v", err)
	}
}

// kfake closes the connection on bad credentials where Kafka answers
// SASL_AUTHENTICATION_FAILED (then closes). For PLAIN the test answers like Kafka through a
// control function, so the terminal classification is checked against the real error code;
// for SCRAM it checks that wrong credentials fail and right ones work.
func TestWrongSASLCredentialsFailAndRightOnesWork(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			ctx := testCtx(t)
			k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "cdc", "s3cret"))
			c := k.Cluster()
			if mech == "PLAIN" {
				c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					r := req.(*kmsg.SASLAuthenticateRequest)
					if parts := bytes.Split(r.SASLAuthBytes, []byte{0}); len(parts) == 3 && string(parts[2]) == "s3cret" {
						return nil, nil, false // kfake authenticates
					}
					resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
					resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
					msg := "Authentication failed: Invalid username or password"
					resp.ErrorMessage = &msg
					return resp, nil, true
				})
			}
			opts := Options{Brokers: []string{k.Addr()}, CreateTopics: true, Partitions: 1, WriteTimeout: 3 * time.Second,
				SASL: SASL{Mechanism: mech, Username: "cdc", Password: "wrong"}}
			_, err := New(ctx, "stream", "prod", opts, checkpoint.None{}, nil)
			if err == nil {
				t.Fatal("wrong password accepted")
			}
			if mech == "PLAIN" && !retry.IsTerminal(err) {
				t.Fatalf("wrong password: error %v, want a terminal error", err)
			}
			t.Logf("wrong password: %v", err)
			opts.SASL.Password = "s3cret"
			s, err := New(ctx, "stream", "prod", opts, checkpoint.None{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Write(ctx, change.Batch{Resource: nodes, Checkpoint: 1, Changes: []change.Change{chg(nodes, "", "n", 1, change.OpCreate, `{}`)}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUnknownCompressionAndSASLMechanismNameTheirKeys(t *testing.T) {
	for key, opts := range map[string]Options{
		"kafka.compression":    {Brokers: []string{"127.0.0.1:1"}, Compression: "brotli"},
		"kafka.sasl.mechanism": {Brokers: []string{"127.0.0.1:1"}, SASL: SASL{Mechanism: "GSSAPI"}},
	} {
		_, err := New(context.Background(), "s", "c", opts, checkpoint.None{}, nil)
		if err == nil || !strings.Contains(err.Error(), key) || !retry.IsTerminal(err) {
			t.Errorf("%s: error %v", key, err)
		}
	}
}
