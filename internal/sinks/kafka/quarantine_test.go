package kafka

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// quarantineLimit is the test broker's message.max.bytes: small, so that a poison record
// is 150 KB rather than over a megabyte.
const quarantineLimit = 100_000

func smallBroker(t *testing.T) *testenv.Kafka {
	return testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": fmt.Sprint(quarantineLimit)}))
}

// countingMetrics is a Metrics hook that counts per sink and resource.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countingMetrics) Quarantined(sink, resource string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[sink+"/"+resource] += n
}

func (m *countingMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// quarantineSink is a sink on k with opts, its metrics hook and its log.
func quarantineSink(t *testing.T, k *testenv.Kafka, opts Options) (*Sink, *countingMetrics, *syncBuf) {
	t.Helper()
	opts.Brokers = []string{k.Addr()}
	logs := &syncBuf{}
	s, err := New(testCtx(t), "stream", "prod", opts, fileStore(t), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := &countingMetrics{}
	s.SetMetrics(m)
	return s, m, logs
}

// bigObject is a JSON object of about size bytes.
func bigObject(name string, size int) string {
	return fmt.Sprintf(`{"kind":"Deployment","metadata":{"name":%q},"pad":%q}`, name, strings.Repeat("x", size))
}

// poisonBatch is 12 keys with two versions each, in RV order, on every partition of a
// 3-partition topic; the second version of ns/big (RV 119) is a 150 KB object, over the
// broker's limit, and a delete of ns/k03 carries a 150 KB last state.
func poisonBatch() (change.Batch, map[string]bool) {
	var cs []change.Change
	rv := change.RV(100)
	poison := map[string]bool{}
	for v := range 2 {
		for i := range 12 {
			name := fmt.Sprintf("k%02d", i)
			op, obj := change.OpCreate, fmt.Sprintf(`{"v":%d}`, v)
			if v == 1 {
				op = change.OpUpdate
			}
			switch {
			case i == 3 && v == 1:
				op, obj = change.OpDelete, bigObject(name, 150_000)
				poison[fmt.Sprintf("ns/%s@%d", name, rv)] = true
			case i == 7:
				name = "big"
				if v == 1 {
					obj = bigObject(name, 150_000)
					poison[fmt.Sprintf("ns/%s@%d", name, rv)] = true
				}
			}
			cs = append(cs, chg(deployments, "ns", name, rv, op, obj))
			rv++
		}
	}
	return change.Batch{Resource: deployments, Checkpoint: rv + 10, Changes: cs}, poison
}

// expectStubsInPlace checks the data topic against b: every record once, each key's in
// b's order, and the records of the poison changes (key@rv) replaced by stubs that name
// the object and say why.
func expectStubsInPlace(t *testing.T, k *testenv.Kafka, b change.Batch, poison map[string]bool) {
	t.Helper()
	expectEveryRecordOnceInKeyOrder(t, k, b) // ids: key, RV, op; a stub has its record's
	msgs, err := k.ReadAll(testCtx(t), TopicName(DefaultTopic, "prod", b.Resource))
	if err != nil {
		t.Fatal(err)
	}
	stubs := 0
	for _, m := range msgs {
		if m.Value == nil {
			continue
		}
		id := string(m.Key) + "@" + header(m, HeaderRV)
		var e struct {
			Op     string `json:"op"`
			Source struct {
				UID              string `json:"uid"`
				ResourceVersion  string `json:"resourceVersion"`
				Quarantined      bool   `json:"quarantined"`
				QuarantineReason string `json:"quarantineReason"`
			} `json:"source"`
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(m.Value, &e); err != nil || json.Unmarshal(m.Value, &raw) != nil {
			t.Fatalf("%s: not JSON: %v", id, err)
		}
		if !poison[id] {
			if e.Source.Quarantined || header(m, HeaderQuarantined) != "<missing>" {
				t.Errorf("%s: marked quarantined, but it fits", id)
			}
			continue
		}
		stubs++
		if len(m.Value) > 1000 {
			t.Errorf("%s: the stub is %d bytes", id, len(m.Value))
		}
		if !e.Source.Quarantined || !strings.Contains(e.Source.QuarantineReason, "over the 100000 bytes") ||
			header(m, HeaderQuarantined) != "true" {
			t.Errorf("%s: stub source %+v, header %q: want quarantined with the reason", id, e.Source, header(m, HeaderQuarantined))
		}
		state := raw["after"]
		if e.Op == "d" {
			state = raw["before"]
		}
		name := strings.TrimPrefix(string(m.Key), "ns/")
		want := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":%q}}`,
			name, name, header(m, HeaderRV))
		if string(state) != want {
			t.Errorf("%s: stub state %s, want %s", id, state, want)
		}
		if src, err := decodeSource(m.Value); err != nil || src.UID != "uid-"+name || src.ResourceVersion != header(m, HeaderRV) {
			t.Errorf("%s: the key index reads source %+v (%v) from the stub", id, src, err)
		}
	}
	if stubs != len(poison) {
		t.Errorf("%d stubs in the data topic, want %d", stubs, len(poison))
	}
}

// expectDeadLetters checks the dead-letter topic: each poison change of b once, with
// headers naming it, the SHA-256 and size of the whole record value, and as much of the
// value as fitted.
func expectDeadLetters(t *testing.T, k *testenv.Kafka, b change.Batch, poison map[string]bool, wantValue int) {
	t.Helper()
	full := map[string][]byte{}
	for i := range b.Changes {
		c := &b.Changes[i]
		if id := c.Key.String() + "@" + c.RV.String(); poison[id] {
			full[id] = appendMessages(nil, "", c, nil)[0].Value
		}
	}
	dlq := DeadLetterTopicName("", DefaultTopic, "prod", b.Resource)
	msgs, err := k.ReadAll(testCtx(t), dlq)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range msgs {
		id := string(m.Key) + "@" + header(m, HeaderRV)
		seen[id]++
		v, ok := full[id]
		if !ok {
			t.Errorf("dead-letter record %s is of no poison change", id)
			continue
		}
		sum := sha256.Sum256(v)
		name := strings.TrimPrefix(string(m.Key), "ns/")
		if header(m, HeaderSHA256) != hex.EncodeToString(sum[:]) || header(m, HeaderSize) != fmt.Sprint(len(v)) ||
			header(m, HeaderUID) != "uid-"+name || header(m, HeaderCluster) != "prod" || header(m, HeaderResource) != "deployments.apps" ||
			header(m, HeaderTopic) != TopicName(DefaultTopic, "prod", b.Resource) || header(m, HeaderTruncated) != "true" ||
			!strings.Contains(header(m, HeaderReason), "bytes") {
			t.Errorf("dead-letter record %s: headers %v", id, m.Headers)
		}
		if !bytes.HasPrefix(v, m.Value) || len(m.Value) < wantValue || len(m.Value) >= len(v) {
			t.Errorf("dead-letter record %s: value of %d bytes is not a prefix of at least %d of the record's %d", id, len(m.Value), wantValue, len(v))
		}
	}
	for id := range poison {
		if seen[id] != 1 {
			t.Errorf("poison change %s is in the dead-letter topic %d times, want once", id, seen[id])
		}
	}
}

func keyIndexOf(t *testing.T, s *Sink, res change.Resource) map[string]change.Entry {
	t.Helper()
	out := map[string]change.Entry{}
	if err := s.KeyIndex(testCtx(t), res, func(k change.Key, e change.Entry) error {
		out[k.String()] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A record over the broker's limit between normal records of one batch: measured before
// the first send, its change is quarantined (a stub in its place, the record in the
// dead-letter topic, a warn log naming it, the metric), everything else lands once and in
// order, the checkpoint moves on, and a later good version of the key replaces the stub.
func TestAnOversizedRecordIsQuarantinedAndEverythingElseLandsInOrder(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	s, m, logs := quarantineSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions})
	if s.batchBytes != quarantineLimit {
		t.Fatalf("the writer's batch bytes are %d, want the broker's message.max.bytes %d", s.batchBytes, quarantineLimit)
	}
	b, poison := poisonBatch()
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write: %v", err)
	}
	expectStubsInPlace(t, k, b, poison)
	expectDeadLetters(t, k, b, poison, quarantineLimit-1000)
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
	if n := m.get("stream/deployments.apps"); n != 2 {
		t.Errorf("Quarantined counted %d, want 2", n)
	}
	for _, want := range []string{"object=ns/big", "rv=119", "object=ns/k03", "rv=115", "deadLetterTopic=kube.prod.apps.deployments.quarantine"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"quarantined"); n != 2 {
		t.Errorf("%d quarantine warnings, want 2:\n%s", n, logs.String())
	}
	if e := keyIndexOf(t, s, deployments)["ns/big"]; e.UID != "uid-big" || e.RV != 119 {
		t.Errorf("key index entry of ns/big %+v, want the quarantined version's uid and RV 119", e)
	}
	q, err := ReadQuarantine(ctx, "prod", s.opts, deployments, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r := q[change.Key{Namespace: "ns", Name: "big"}]; r.RV != 119 || r.UID != "uid-big" || r.Op != "u" || !r.Truncated || r.Size < 150_000 ||
		!strings.Contains(r.Reason, "over the 100000 bytes") || len(q) != 2 {
		t.Errorf("ReadQuarantine: %+v", q)
	}

	// A later good version is the key's next record: the stub is history.
	later := change.Batch{Resource: deployments, Checkpoint: 200, Changes: []change.Change{
		chg(deployments, "ns", "big", 190, change.OpUpdate, `{"v":"small again"}`),
	}}
	if err := s.Write(ctx, later); err != nil {
		t.Fatal(err)
	}
	msgs, err := k.ReadAll(ctx, TopicName(DefaultTopic, "prod", deployments))
	if err != nil {
		t.Fatal(err)
	}
	var big []string
	for _, m := range msgs {
		if string(m.Key) == "ns/big" {
			big = append(big, header(m, HeaderRV)+":"+header(m, HeaderQuarantined))
		}
	}
	if fmt.Sprint(big) != "[107:<missing> 119:true 190:<missing>]" {
		t.Errorf("records of ns/big: %v, want the create, the stub, the good version", big)
	}
	if e := keyIndexOf(t, s, deployments)["ns/big"]; e.RV != 190 {
		t.Errorf("key index entry of ns/big %+v, want RV 190", e)
	}
	if n := m.get("stream/deployments.apps"); n != 2 {
		t.Errorf("Quarantined counted %d after a good batch, want still 2", n)
	}
}

// Quarantine records are a pure function of the batch, like every record: written again
// (a re-emit after a restart), the stub and the dead-letter record are byte-identical.
func TestAQuarantinedChangeWrittenAgainIsByteIdentical(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	s, _, _ := quarantineSink(t, k, Options{CreateTopics: true, Partitions: 1})
	b, _ := poisonBatch()
	for range 2 {
		if err := s.Prepare(b)(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{TopicName(DefaultTopic, "prod", deployments), DeadLetterTopicName("", DefaultTopic, "prod", deployments)} {
		msgs, err := k.ReadAll(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		first := map[string]kafka.Message{}
		copies := 0
		for _, m := range msgs {
			id := recordID(m)
			f, ok := first[id]
			if !ok {
				first[id] = m
				continue
			}
			copies++
			if !bytes.Equal(f.Value, m.Value) || fmt.Sprint(f.Headers) != fmt.Sprint(m.Headers) || !f.Time.Equal(m.Time) {
				t.Errorf("%s: %s differs from its first copy", topic, id)
			}
		}
		if copies == 0 || copies*2 != len(msgs) {
			t.Errorf("%s: %d records, %d of them copies: want the batch twice", topic, len(msgs), copies)
		}
	}
}

// With maxMessageBytes set above what the broker takes, the poison record is sent and the
// broker refuses its partition's batch: the sink splits the refused batch until the record
// is alone, quarantines it, and every other record still lands once and in order. The
// dead-letter record, refused too (it was cut to the configured limit), is cut further.
func TestARecordTheBrokerRefusesIsFoundBySplittingTheBatchAndQuarantined(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	s, m, logs := quarantineSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions, MaxMessageBytes: 4 << 20})
	b, poison := poisonBatch()
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if !strings.Contains(logs.String(), "smaller batches") {
		t.Errorf("the refused batch was not split (no log of it): the test did not exercise a batch refusal:\n%s", logs.String())
	}
	msgs, err := k.ReadAll(ctx, TopicName(DefaultTopic, "prod", deployments))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range msgs {
		if header(msg, HeaderQuarantined) == "true" && !bytes.Contains(msg.Value, []byte("the broker refused it as too large")) {
			t.Errorf("stub %s: %s, want the broker's refusal as the reason", recordID(msg), msg.Value)
		}
	}
	expectEveryRecordOnceInKeyOrder(t, k, b)
	expectDeadLetters(t, k, b, poison, shrinkDeadLetterTo)
	if n := m.get("stream/deployments.apps"); n != 2 {
		t.Errorf("Quarantined counted %d, want 2", n)
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
}

// The broker fails while a batch with a poison change is written: first a normal record's
// partition refuses, then the dead-letter topic. The pipeline's retries of the prepared
// write send only what is still unacknowledged: no record, stub or dead-letter record
// twice, and the change is reported once, after the commit.
func TestARetryAfterABrokerFailureDuplicatesNothing(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	s, m, _ := quarantineSink(t, k, Options{CreateTopics: true, Partitions: partialPartitions})
	topic := TopicName(DefaultTopic, "prod", deployments)
	dlq := DeadLetterTopicName("", DefaultTopic, "prod", deployments)
	if _, err := s.Checkpoint(ctx, deployments); err != nil {
		t.Fatal(err)
	}
	if err := k.CreateTopic(ctx, dlq, partialPartitions, true); err != nil {
		t.Fatal(err)
	}
	b, poison := poisonBatch()
	dataFault, err := k.FailProduce(topic, testenv.PartitionOf("ns/k00", partialPartitions), -1)
	if err != nil {
		t.Fatal(err)
	}
	write := s.Prepare(b)
	if err := write(ctx); err == nil || retry.IsTerminal(err) {
		t.Fatalf("write with a partition refusing: %v, want a retryable error", err)
	}
	dataFault.Remove()
	dlqFault, err := k.FailProduce(dlq, testenv.PartitionOf("ns/big", partialPartitions), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx); err == nil || retry.IsTerminal(err) {
		t.Fatalf("write with the dead-letter topic refusing: %v, want a retryable error", err)
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != 0 {
		t.Fatalf("checkpoint moved to %d before the dead-letter records were acknowledged", rv)
	}
	if n := m.get("stream/deployments.apps"); n != 0 {
		t.Errorf("Quarantined counted %d before the commit", n)
	}
	dlqFault.Remove()
	if err := write(ctx); err != nil {
		t.Fatalf("the retried write: %v", err)
	}
	if dataFault.Hits() == 0 || dlqFault.Hits() == 0 {
		t.Fatalf("faults hit %d and %d times: the test did not exercise both failures", dataFault.Hits(), dlqFault.Hits())
	}
	expectStubsInPlace(t, k, b, poison)
	expectDeadLetters(t, k, b, poison, quarantineLimit-1000)
	if n := m.get("stream/deployments.apps"); n != 2 {
		t.Errorf("Quarantined counted %d, want 2", n)
	}
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
}

// With createTopics off and no dead-letter topic, a poison change still never stops the
// stream: the stub is written, the checkpoint moves on, and the log says the change is
// only there.
func TestAMissingDeadLetterTopicLeavesTheChangeInTheLogOnly(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	if err := k.CreateTopic(ctx, TopicName(DefaultTopic, "prod", deployments), 1, true); err != nil {
		t.Fatal(err)
	}
	s, m, logs := quarantineSink(t, k, Options{})
	b, poison := poisonBatch()
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write: %v", err)
	}
	expectStubsInPlace(t, k, b, poison)
	if rv, _ := s.Checkpoint(ctx, deployments); rv != b.Checkpoint {
		t.Errorf("checkpoint %d, want %d", rv, b.Checkpoint)
	}
	if n := m.get("stream/deployments.apps"); n != 2 || !strings.Contains(logs.String(), "deadLetterError=") ||
		!strings.Contains(logs.String(), "kube.prod.apps.deployments.quarantine does not exist") {
		t.Errorf("counted %d; log:\n%s", n, logs.String())
	}
}

// The limit is what the brokers accept: the broker's message.max.bytes, a topic's own
// max.message.bytes below it, or maxMessageBytes when configured.
func TestTheRecordLimitIsWhatTheBrokerAndTheTopicAccept(t *testing.T) {
	ctx := testCtx(t)
	k := smallBroker(t)
	c := k.Cluster()
	if err := c.CreateTopic("small", 1, map[string]string{"max.message.bytes": "50000"}); err != nil {
		t.Fatal(err)
	}
	if err := k.CreateTopic(ctx, "plain", 1, true); err != nil {
		t.Fatal(err)
	}
	s, _, _ := quarantineSink(t, k, Options{})
	for topic, want := range map[string]int{"small": 50_000, "plain": quarantineLimit} {
		ti, err := s.ensureTopic(ctx, topic)
		if err != nil || ti.maxBytes != want {
			t.Errorf("topic %s: limit %d (%v), want %d", topic, ti.maxBytes, err, want)
		}
	}
	set, _, _ := quarantineSink(t, k, Options{MaxMessageBytes: 300_000})
	if ti, err := set.ensureTopic(ctx, "small"); err != nil || ti.maxBytes != 300_000 || set.batchBytes != 300_000 {
		t.Errorf("configured 300000: topic limit %d (%v), batch bytes %d", ti.maxBytes, err, set.batchBytes)
	}
	def, _, _ := quarantineSink(t, testenv.NewKafka(t), Options{})
	if def.batchBytes != 1048588 {
		t.Errorf("a default broker: batch bytes %d, want its message.max.bytes 1048588", def.batchBytes)
	}
}

func TestDeadLetterTopicNameExpandsTheTemplate(t *testing.T) {
	for _, tc := range []struct{ template, want string }{
		{"", "kube.prod.apps.deployments.quarantine"},
		{"dlq.{cluster}.{resource}", "dlq.prod.deployments"},
		{"{topic}-dead", "kube.prod.apps.deployments-dead"},
		{"all-poison", "all-poison"},
	} {
		if got := DeadLetterTopicName(tc.template, DefaultTopic, "prod", deployments); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.template, got, tc.want)
		}
	}
}

func TestChunksKeepEachPartitionWithinTheTopicsLimit(t *testing.T) {
	var msgs []kafka.Message
	for i := range 10 {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 1000+i)})
	}
	n := chunkLen(msgs, 1, 3000)
	if n != 2 {
		t.Errorf("chunkLen of 1 KB records within 3000 bytes: %d, want 2", n)
	}
	if n := chunkLen(msgs, 1, 100); n != 1 {
		t.Errorf("a record over the limit goes alone: chunkLen %d", n)
	}
	if !fits(msgs[0], batchOverhead+recordSize(msgs[0])) || fits(msgs[0], batchOverhead+recordSize(msgs[0])-1) {
		t.Error("fits disagrees with recordSize and batchOverhead")
	}
}
