package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// The widgets topic and its dead-letter topic (cluster e2e, group e2e.kube-cdc.io).
const (
	widgetTopic      = "kube.e2e.e2e.kube-cdc.io.widgets"
	widgetDeadLetter = widgetTopic + ".quarantine"
	widgetResource   = "widgets.e2e.kube-cdc.io"
)

// poisonSize is the big widget's payload: over the broker's 1 MiB message.max.bytes, under
// the 1.5 MiB etcd takes in one request (the apiserver's own limit on a body is 3 MiB).
const poisonSize = 1_200_000

// quarantineConfig streams the widgets of ns into a PostgreSQL sink and a Kafka sink of
// the broker at brokers, in one daemon, with metrics on addr.
func quarantineConfig(t *testing.T, dsn, brokers, ns, addr string) string {
	return writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: %s
    namespaces: [%s]
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
  - name: stream
    type: kafka
    kafka:
      brokers: [%q]
      createTopics: true
      partitions: 3
    checkpoint: {type: file, path: %q}
metrics:
  address: %q
`, kube.Kubeconfig, widgetResource, ns, dsn, brokers, filepath.Join(t.TempDir(), "state.db"), addr))
}

// widgetClient writes the widgets of one namespace.
type widgetClient struct {
	t  *testing.T
	ns string
}

func (w widgetClient) create(name string, data string) string {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.kube-cdc.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec":     map[string]any{"data": data},
	}}
	got, err := kube.Dynamic().Resource(widgets).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create widget %s (%d bytes of data): %v", name, len(data), err)
	}
	return got.GetResourceVersion()
}

func (w widgetClient) update(name string, data string) string {
	w.t.Helper()
	c := kube.Dynamic().Resource(widgets).Namespace(w.ns)
	u, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	u.Object["spec"] = map[string]any{"data": data}
	if u, err = c.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return u.GetResourceVersion()
}

// widgetRecord is what the test reads of a record of the widgets topic.
type widgetRecord struct {
	rv          string
	quarantined bool // the stub of a quarantined change
	after       json.RawMessage
	reason      string
}

// latestWidgets reads the widgets topic and returns each key's latest record.
func latestWidgets(k *testenv.Kafka) (map[string]widgetRecord, error) {
	recs, err := readRecords(k, widgetTopic)
	if err != nil {
		return nil, err
	}
	out := map[string]widgetRecord{}
	for _, r := range recs {
		if r.tombstone() {
			delete(out, r.key)
			continue
		}
		var e struct {
			After  json.RawMessage `json:"after"`
			Source struct {
				Quarantined      bool   `json:"quarantined"`
				QuarantineReason string `json:"quarantineReason"`
			} `json:"source"`
		}
		if err := json.Unmarshal(r.m.Value, &e); err != nil {
			return nil, fmt.Errorf("%v: %v", r, err)
		}
		if rvOf(r.rv) >= rvOf(out[r.key].rv) {
			out[r.key] = widgetRecord{rv: r.rv, quarantined: e.Source.Quarantined, after: e.After, reason: e.Source.QuarantineReason}
		}
	}
	return out, nil
}

// A custom resource over the broker's 1 MiB limit, written among normal widgets while one
// daemon streams them into PostgreSQL and Kafka: the daemon keeps running; every widget
// lands in both sinks (PostgreSQL stores the big one whole); in Kafka the big one is a stub
// with the change in the dead-letter topic, named by a warn log, the
// kube_cdc_quarantined_total metric and `kube-cdc status`. A restart starts cleanly, and a
// later small version of the widget replaces the stub.
func TestAnOversizedCustomResourceIsQuarantinedInKafkaWhileBothSinksGoOn(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	started := time.Now()
	ctx := context.Background()
	ensureWidgetCRD(t)
	ns := namespace(t, "q")
	w := widgetClient{t: t, ns: ns}
	for i := range 3 {
		w.create("w-"+strconv.Itoa(i), "small")
	}
	k := testenv.NewKafka(t)
	dsn := pg.NewDatabase(t)
	addr := opsFreeAddr(t)
	cfg := quarantineConfig(t, dsn, k.Addr(), ns, addr)
	d := start(t, "run", "-c", cfg)
	waitReady(t, addr) // so the big widget comes as a watch event between normal ones

	w.create("w-3", "small")
	bigRV := w.create("big", strings.Repeat("0123456789abcdef", poisonSize/16))
	w.update("w-1", "updated after the big one")
	w.create("w-4", "small")
	listed := listedWidgets(t, ns)

	// PostgreSQL holds every widget at its listed version, the big one included.
	converges(t, dsn, "widgets", func() map[string]string { return listed })
	if n := count(t, connect(t, dsn), `SELECT length(object->'spec'->>'data') FROM kube_cdc.objects WHERE resource = 'widgets' AND name = 'big' AND namespace = $1`, ns); n != poisonSize {
		t.Errorf("PostgreSQL holds %d bytes of the big widget's data, want %d", n, poisonSize)
	}
	// Kafka holds every widget at its listed version; the big one as a stub.
	bigKey := ns + "/big"
	eventually(t, 60*time.Second, func() error {
		latest, err := latestWidgets(k)
		if err != nil {
			return err
		}
		for key, v := range listed {
			_, rv, _ := strings.Cut(v, "@")
			if latest[key].rv != rv {
				return fmt.Errorf("%s: latest record at RV %q, want %s", key, latest[key].rv, rv)
			}
			if latest[key].quarantined != (key == bigKey) {
				return fmt.Errorf("%s: quarantined %v", key, latest[key].quarantined)
			}
		}
		return nil
	})
	latest, _ := latestWidgets(k)
	stub := latest[bigKey]
	if len(stub.after) > 500 || !strings.Contains(string(stub.after), `"resourceVersion":"`+bigRV+`"`) ||
		!strings.Contains(stub.reason, "over the 1048588 bytes topic "+widgetTopic+" accepts") {
		t.Errorf("the stub of %s: after %s, reason %q", bigKey, stub.after, stub.reason)
	}
	dead, err := k.ReadAll(ctx, widgetDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || string(dead[0].Key) != bigKey || headerOf(dead[0], "kube-cdc.rv") != bigRV ||
		headerOf(dead[0], "kube-cdc.size") == "" || len(dead[0].Value) < 1_000_000 {
		t.Errorf("dead-letter topic: %d records, want the big widget's at RV %s with most of its value", len(dead), bigRV)
	}
	waitMetricAbove(t, d, addr, "kube_cdc_quarantined_total", map[string]string{"sink": "stream", "resource": widgetResource}, 0, 30*time.Second)
	if v, _ := metric(addr, "kube_cdc_quarantined_total", map[string]string{"sink": "stream", "resource": widgetResource}); v != 1 {
		t.Errorf("kube_cdc_quarantined_total = %v, want 1", v)
	}
	warn := regexp.MustCompile(`level=WARN msg="quarantined a change[^"]*".* sink=stream.* resource=` + regexp.QuoteMeta(widgetResource) +
		` object=` + regexp.QuoteMeta(bigKey) + ` uid=\S+ rv=` + bigRV + ` .*reason=`)
	if !warn.MatchString(d.log()) {
		t.Errorf("no warn line naming %s at RV %s:\n%s", bigKey, bigRV, testenv.Tail(d.logPath, 20))
	}
	select {
	case <-d.done:
		t.Fatalf("kube-cdc exited: %v\n%s", d.err, testenv.Tail(d.logPath, 30))
	default:
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}

	code, out := runCLI(t, "status", "-c", cfg)
	row := regexp.MustCompile(`(?m)^stream\s+` + regexp.QuoteMeta(widgetResource) + `\s+\S+\s+\d+\s+-\s+6\s+-\s+1\s*$`)
	if code != 0 || !row.MatchString(out) || !strings.Contains(out, "sink stream: quarantined "+widgetResource+" "+bigKey) ||
		!strings.Contains(out, "rv "+bigRV) || !strings.Contains(out, widgetDeadLetter) {
		t.Errorf("status (exit %d) does not count and name the quarantined widget:\n%s", code, out)
	}

	// A restart starts cleanly from the checkpoints; a small version replaces the stub.
	d = start(t, "run", "-c", cfg)
	waitReady(t, addr)
	smallRV := w.update("big", "small now")
	eventually(t, 60*time.Second, func() error {
		latest, err := latestWidgets(k)
		if err == nil && (latest[bigKey].rv != smallRV || latest[bigKey].quarantined) {
			err = fmt.Errorf("%s: latest record %+v, want RV %s unquarantined", bigKey, latest[bigKey], smallRV)
		}
		return err
	})
	listed = listedWidgets(t, ns)
	converges(t, dsn, "widgets", func() map[string]string { return listed })
	if strings.Contains(d.log(), "quarantined a change") || strings.Contains(d.log(), "level=ERROR") {
		t.Errorf("the restarted daemon quarantined or failed:\n%s", testenv.Tail(d.logPath, 30))
	}
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	code, out = runCLI(t, "status", "-c", cfg)
	row = regexp.MustCompile(`(?m)^stream\s+` + regexp.QuoteMeta(widgetResource) + `\s+\S+\s+\d+\s+-\s+6\s+-\s+0\s*$`)
	if code != 0 || !row.MatchString(out) || strings.Contains(out, "quarantined "+widgetResource) {
		t.Errorf("status (exit %d) still shows the replaced widget quarantined:\n%s", code, out)
	}
	t.Logf("took %v", time.Since(started).Round(time.Millisecond))
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		if code, _, err := opsGet("http://" + addr + "/readyz"); err != nil || code != 200 {
			return fmt.Errorf("/readyz: %d %v", code, err)
		}
		return nil
	})
}

// listedWidgets is a fresh LIST of the namespace's widgets as key → "uid@rv".
func listedWidgets(t *testing.T, ns string) map[string]string {
	t.Helper()
	l, err := kube.Dynamic().Resource(widgets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range l.Items {
		out[ns+"/"+u.GetName()] = string(u.GetUID()) + "@" + u.GetResourceVersion()
	}
	return out
}

func headerOf(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
