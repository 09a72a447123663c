package produce

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

const topic = "kube.prod.apps.deployments"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// transport is a Transport as the sink builds one (kafka.NewTransport): its metadata
// lives 6 s, so routing from its cache lags a leader move by up to that.
func transport() *kafka.Transport {
	return &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DialTimeout: 5 * time.Second,
		MetadataTTL: 6 * time.Second,
		ClientID:    "kube-cdc-test",
	}
}

// newProducer is a Producer on k with cfg's settings, the brokers and a transport filled
// in, a 10 s write timeout and 1 MiB records unless cfg says otherwise.
func newProducer(t *testing.T, k *testenv.Kafka, cfg Config) *Producer {
	t.Helper()
	cfg.Brokers = []string{k.Addr()}
	if cfg.Transport == nil {
		cfg.Transport = transport()
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = 1 << 20
	}
	p := New(cfg)
	t.Cleanup(func() {
		p.Close()
		cfg.Transport.CloseIdleConnections()
	})
	return p
}

// newTopic creates topic on k with the given number of partitions.
func newTopic(t *testing.T, k *testenv.Kafka, partitions int) {
	t.Helper()
	if err := k.CreateTopic(testCtx(t), topic, partitions, true); err != nil {
		t.Fatal(err)
	}
}

// spread is two versions of each of n keys, the first versions first, on every partition
// of a topic of 6.
func spread(t *testing.T, n int) []kafka.Message {
	used := map[int32]bool{}
	var msgs []kafka.Message
	for v := range 2 {
		for i := range n {
			key := fmt.Sprintf("ns/d%03d", i)
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"v":%d}`, v),
				Headers: []kafka.Header{{Key: "kube-cdc.rv", Value: fmt.Appendf(nil, "%d", v*n+i+1)}},
				Time:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(v) * time.Second)})
			used[testenv.PartitionOf(key, 6)] = true
		}
	}
	if len(used) != 6 {
		t.Fatalf("the records span %d partitions, want 6", len(used))
	}
	return msgs
}

// id names a record by key and version.
func id(m kafka.Message) string { return string(m.Key) + "=" + string(m.Value) }

// expectOnceOnTheirPartitionsInOrder fails unless topic holds each of msgs exactly once,
// on the partition kafka-go's hash balancer picks for its key, with its headers and time,
// and each partition's records in the order of msgs.
func expectOnceOnTheirPartitionsInOrder(t *testing.T, k *testenv.Kafka, msgs []kafka.Message) {
	t.Helper()
	got, err := k.ReadAll(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{}
	for _, m := range msgs {
		p := int(testenv.PartitionOf(string(m.Key), 6))
		want[p] = append(want[p], id(m))
	}
	held := map[int][]string{}
	for _, m := range got {
		held[m.Partition] = append(held[m.Partition], id(m))
	}
	for p := range 6 {
		if fmt.Sprint(held[p]) != fmt.Sprint(want[p]) {
			t.Errorf("partition %d holds %v, want %v", p, held[p], want[p])
		}
	}
	sent := map[string]kafka.Message{}
	for _, m := range msgs {
		sent[id(m)] = m
	}
	for _, m := range got {
		s := sent[id(m)]
		if !m.Time.Equal(s.Time) || len(m.Headers) != 1 || !bytes.Equal(m.Headers[0].Value, s.Headers[0].Value) {
			t.Errorf("record %s: time %v headers %v, want %v %v", id(m), m.Time, m.Headers, s.Time, s.Headers)
		}
	}
}

// countProduces counts the produce requests the broker gets from now on.
func countProduces(k *testenv.Kafka) *atomic.Int32 {
	var n atomic.Int32
	k.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster().KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

func TestAChunkGoesToItsKeysPartitionsInOrderInOneRequestPerBroker(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{})
	produces := countProduces(k)
	msgs := spread(t, 30)
	if err := p.Send(testCtx(t), topic, 6, msgs); err != nil {
		t.Fatal(err)
	}
	if n := produces.Load(); n != 1 {
		t.Errorf("%d produce requests for a chunk on 6 partitions of one broker, want 1", n)
	}
	expectOnceOnTheirPartitionsInOrder(t, k, msgs)
}

func TestCompressedRecordsReadBackAsSent(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{Compression: kafka.Zstd})
	msgs := spread(t, 30)
	if err := p.Send(testCtx(t), topic, 6, msgs); err != nil {
		t.Fatal(err)
	}
	expectOnceOnTheirPartitionsInOrder(t, k, msgs)
}

// A partition that refuses fails its own records only: the error lines up with the
// records, the other partitions' records are in the topic, and sending the refused ones
// again completes the chunk with nothing twice.
func TestAPartitionThatRefusesFailsOnlyItsOwnRecords(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{})
	msgs := spread(t, 30)
	refused := testenv.PartitionOf(string(msgs[0].Key), 6)
	fault, err := k.FailProduce(topic, refused, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Send(testCtx(t), topic, 6, msgs)
	var werr kafka.WriteErrors
	if !errors.As(err, &werr) || len(werr) != len(msgs) {
		t.Fatalf("Send = %v, want kafka.WriteErrors lined up with its %d records", err, len(msgs))
	}
	var rest []kafka.Message
	for i, m := range msgs {
		onRefused := testenv.PartitionOf(string(m.Key), 6) == refused
		if onRefused != (werr[i] != nil) {
			t.Errorf("record %s (refused partition: %v) has error %v", id(m), onRefused, werr[i])
		}
		if werr[i] != nil {
			if !errors.Is(werr[i], kafka.Unknown) {
				t.Errorf("record %s: error %v, want the broker's UNKNOWN_SERVER_ERROR", id(m), werr[i])
			}
			rest = append(rest, m)
		}
	}
	if fault.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", fault.Hits())
	}
	got, err := k.ReadAll(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs)-len(rest) {
		t.Errorf("the topic holds %d records after the partial failure, want the %d acknowledged", len(got), len(msgs)-len(rest))
	}
	if err := p.Send(testCtx(t), topic, 6, rest); err != nil {
		t.Fatalf("sending the refused records again: %v", err)
	}
	expectOnceOnTheirPartitionsInOrder(t, k, msgs)
}

func TestARecordOverMaxMessageBytesFailsTheChunkBeforeAnythingIsSent(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{MaxMessageBytes: 1000})
	msgs := spread(t, 30)
	big := kafka.Message{Key: []byte("ns/big"), Value: bytes.Repeat([]byte("x"), 1000)}
	msgs = append(msgs[:10:10], append([]kafka.Message{big}, msgs[10:]...)...)
	produces := countProduces(k)
	err := p.Send(testCtx(t), topic, 6, msgs)
	var tooLarge kafka.MessageTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Send = %v, want a kafka.MessageTooLargeError", err)
	}
	if string(tooLarge.Message.Key) != "ns/big" || len(tooLarge.Remaining) != len(msgs)-1 {
		t.Errorf("the error names %q with %d others, want ns/big with %d", tooLarge.Message.Key, len(tooLarge.Remaining), len(msgs)-1)
	}
	if n := produces.Load(); n != 0 {
		t.Errorf("%d produce requests, want none", n)
	}
}

// everyRecordFails reports whether err is a kafka.WriteErrors whose every record failed
// with target.
func everyRecordFails(err, target error) bool {
	var werr kafka.WriteErrors
	if !errors.As(err, &werr) || len(werr) == 0 {
		return false
	}
	for _, e := range werr {
		if !errors.Is(e, target) {
			return false
		}
	}
	return true
}

// holdFirstProduce makes the broker sit on the first produce request until release is
// closed (then handle it as usual); later ones are handled at once.
func holdFirstProduce(k *testenv.Kafka, release <-chan struct{}) {
	c := k.Cluster()
	var seen atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if seen.Swap(true) {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
}

func TestACancelledSendReturnsWithoutWaitingForTheBroker(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{}) // WriteTimeout: 10 s
	release := make(chan struct{})
	defer close(release)
	holdFirstProduce(k, release)
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := p.Send(ctx, topic, 6, spread(t, 12))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the cancelled send returned after %v, want soon after the cancel", took)
	}
	if !everyRecordFails(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestASendTheBrokerSitsOnFailsAfterTheWriteTimeoutAndTheNextGoesThrough(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{WriteTimeout: 500 * time.Millisecond})
	release := make(chan struct{})
	holdFirstProduce(k, release)
	msgs := spread(t, 12)
	start := time.Now()
	err := p.Send(testCtx(t), topic, 6, msgs)
	took := time.Since(start)
	close(release)
	if err == nil {
		t.Fatal("a produce the broker never answered succeeded")
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("the send failed after %v, want between the write timeout (500ms) and 1.5 times it, give or take", took)
	}
	if err := p.Send(testCtx(t), topic, 6, msgs); err != nil {
		t.Fatalf("the send after the timeout: %v", err)
	}
}

// sentOnce is a Producer on k whose topic of 6 partitions holds spread(t, 12), sent once
// (so its leaders are known), with those records to send again.
func sentOnce(t *testing.T, k *testenv.Kafka) (*Producer, []kafka.Message) {
	t.Helper()
	newTopic(t, k, 6)
	p := newProducer(t, k, Config{})
	msgs := spread(t, 12)
	if err := p.Send(testCtx(t), topic, 6, msgs); err != nil {
		t.Fatal(err)
	}
	return p, msgs
}

func TestAFailedSendReadsThePartitionLeadersAgain(t *testing.T) {
	p, msgs := sentOnce(t, testenv.NewKafka(t))
	ctx := testCtx(t)
	// A leader that moved to a broker now gone: every partition's, still fresh.
	p.mu.Lock()
	for pt := range p.leaderCache[topic].addrs {
		p.leaderCache[topic].addrs[pt] = "127.0.0.1:1"
	}
	p.mu.Unlock()
	if err := p.Send(ctx, topic, 6, msgs); err == nil {
		t.Fatal("a send to a closed port succeeded")
	}
	if err := p.Send(ctx, topic, 6, msgs); err != nil {
		t.Errorf("the send after the failed one: %v, want the leaders read again", err)
	}
}

// A partition's leader moves to another live broker (a broker restarting, a
// reassignment). The Transport keeps routing to the old leader until its next metadata
// refresh, up to 6 s away: the send after the one the old leader refused must learn the
// new leaders from a broker, not from that cache.
func TestTheSendAfterALeaderMovedGoesToTheNewLeader(t *testing.T) {
	k := testenv.NewKafka(t)
	node, _, err := k.Cluster().AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, msgs := sentOnce(t, k)
	ctx := testCtx(t)
	want := map[int32]int32{}
	for pt := range int32(6) {
		to := node
		if k.Cluster().LeaderFor(topic, pt) == node {
			to = 0
		}
		if err := k.Cluster().MoveTopicPartition(topic, pt, to); err != nil {
			t.Fatal(err)
		}
		want[pt] = to
	}
	// The old leader refuses the moved partitions' records (NOT_LEADER_OR_FOLLOWER), or
	// the Transport has learnt the move already.
	err = p.Send(ctx, topic, 6, msgs)
	if err != nil {
		var werr kafka.WriteErrors
		if !errors.As(err, &werr) {
			t.Fatalf("the send the old leader refused: %v, want kafka.WriteErrors", err)
		}
		t.Logf("the send to the old leader: %v", err)
		if err := p.Send(ctx, topic, 6, msgs); err != nil {
			t.Fatalf("the send after the one the old leader refused: %v; want it sent to the new leader", err)
		}
	}
	for pt, to := range want {
		if got := k.Cluster().LeaderFor(topic, pt); got != to {
			t.Fatalf("partition %d is led by node %d, want %d", pt, got, to)
		}
	}
}

func TestASendAfterCloseFails(t *testing.T) {
	p, msgs := sentOnce(t, testenv.NewKafka(t))
	p.Close()
	if err := p.Send(testCtx(t), topic, 6, msgs); !everyRecordFails(err, errConnsClosed) {
		t.Errorf("Send after Close = %v, want %v", err, errConnsClosed)
	}
}

// The Producer's own connections authenticate as the Transport's SASL settings say: a
// broker that requires SASL takes the records with the right credentials only.
func TestConnectionsAuthenticateWithTheTransportsSASLMechanism(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "cdc", "s3cret"), kfake.SeedTopics(6, topic))
			mechanism := func(password string) sasl.Mechanism {
				switch mech {
				case "PLAIN":
					return plain.Mechanism{Username: "cdc", Password: password}
				case "SCRAM-SHA-256":
					m, err := scram.Mechanism(scram.SHA256, "cdc", password)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				m, err := scram.Mechanism(scram.SHA512, "cdc", password)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			wrong := transport()
			wrong.SASL = mechanism("wrong")
			if err := newProducer(t, k, Config{Transport: wrong}).Send(testCtx(t), topic, 6, spread(t, 12)); err == nil {
				t.Fatal("wrong password accepted")
			}
			right := transport()
			right.SASL = mechanism("s3cret")
			if err := newProducer(t, k, Config{Transport: right}).Send(testCtx(t), topic, 6, spread(t, 12)); err != nil {
				t.Fatalf("the right password: %v", err)
			}
		})
	}
}

// The Producer's own connections speak TLS when the Transport does, verifying the
// broker's certificate against the Transport's roots.
func TestConnectionsUseTheTransportsTLS(t *testing.T) {
	cert, roots := selfSigned(t)
	k := testenv.NewKafka(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), kfake.SeedTopics(6, topic))
	tr := transport()
	tr.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if err := newProducer(t, k, Config{Transport: tr}).Send(testCtx(t), topic, 6, spread(t, 12)); err != nil {
		t.Fatalf("Send over TLS: %v", err)
	}
	untrusted := transport()
	untrusted.TLS = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	err := newProducer(t, k, Config{Transport: untrusted}).Send(testCtx(t), topic, 6, spread(t, 12))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Send to a broker whose certificate is not trusted = %v, want a certificate error", err)
	}
}

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, roots
}

// hideTopics makes the broker's answer to a request for every topic's metadata (the
// Transport's refresh, whose result it serves its clients from) list none, until the
// returned function is called.
func hideTopics(t *testing.T, k *testenv.Kafka) (shown func()) {
	c := k.Cluster()
	var blind atomic.Bool
	blind.Store(true)
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.MetadataRequest)
		if r.Topics != nil || !blind.Load() {
			return nil, nil, false
		}
		host, port, _ := net.SplitHostPort(k.Addr())
		p, _ := strconv.Atoi(port)
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
		return resp, nil, true
	})
	return func() { blind.Store(false) }
}

// A topic the Transport's cache does not list (created by another client since its last
// refresh, 6 s at most) is asked of a broker: its partitions and its leaders.
func TestATopicTheTransportDoesNotListYetIsAskedOfABroker(t *testing.T) {
	k := testenv.NewKafka(t)
	newTopic(t, k, 6)
	shown := hideTopics(t, k)
	p := newProducer(t, k, Config{})
	n, err := p.Partitions(testCtx(t), topic)
	if err != nil || n != 6 {
		t.Fatalf("Partitions = %d, %v; want 6", n, err)
	}
	msgs := spread(t, 12)
	if err := p.Send(testCtx(t), topic, 6, msgs); err != nil {
		t.Fatalf("Send: %v", err)
	}
	shown()
	expectOnceOnTheirPartitionsInOrder(t, k, msgs)
	if _, err := p.Partitions(testCtx(t), "missing"); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Errorf("Partitions of a missing topic: %v, want %v", err, kafka.UnknownTopicOrPartition)
	}
}
