package audit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// garbage is an endless body that is not JSON, counting what was read of it.
type garbage struct{ read atomic.Int64 }

func (g *garbage) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	g.read.Add(int64(len(p)))
	return len(p), nil
}

func (g *garbage) sent() int64 { return g.read.Load() }

// outcomes counts the receiver's requests by outcome.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) AuditRequest(outcome string, _ map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// gatedStore is a memStore whose Store, while a gate is set, says it entered and waits for
// the gate to open: a request in Store holds one of the receiver's slots.
type gatedStore struct {
	memStore
	gmu     sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

func (s *gatedStore) Store(ctx context.Context, events []Event) error {
	s.gmu.Lock()
	gate, entered := s.gate, s.entered
	s.gmu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return s.memStore.Store(ctx, events)
}

func (s *gatedStore) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// The receiver answers 413 to a body over audit.webhook.maxBodyBytes without reading it
// (a declared length) or reading no further than the limit (chunked); it answers 503 with Retry-After once maxInFlight requests are under way; and
// the kube-apiserver's webhook backend, sending its batches meanwhile, has every one
// stored: its small batches pass the limit, and a batch refused as busy is sent again
// after Retry-After (a second), not after the backend's own backoff (a minute here).
func TestTheReceiverRefusesBodiesOverItsLimitUnreadAndBusyTimesWhileTheApiserversBatchesArrive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	store, seen := &gatedStore{}, &outcomes{}
	r := &Receiver{Addr: "127.0.0.1:0", CertFile: certs.CertFile, KeyFile: certs.KeyFile, ClientCAFile: certs.CAFile,
		Store: store, Observer: seen, MaxBodyBytes: limit, MaxInFlight: 2}
	ln, err := r.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	url := "https://" + ln.Addr().String() + "/audit"

	k := testenv.NewKube(t, testenv.KubeOptions{Audit: &testenv.AuditOptions{
		Policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n" +
			"- level: RequestResponse\n  users: [dev-a@example.com]\n  resources: [{group: \"\", resources: [configmaps]}]\n  verbs: [create]\n" +
			"- level: None\n",
		// A batch that failed is sent again by the webhook backend's own retry only after a
		// minute: one sent again sooner was sent again by client-go, after Retry-After.
		Webhook: &testenv.AuditWebhook{URL: url, CAPEM: certs.CAPEM, ClientCertPEM: certs.ClientCertPEM, ClientKeyPEM: certs.ClientKeyPEM,
			InitialBackoff: time.Minute},
	}})
	dev, err := k.TokenUser(ctx, testenv.TokenUsers[0])
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(dev)
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitStored := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for !store.has(name) {
			select {
			case <-ctx.Done():
				t.Fatalf("the apiserver's event for ConfigMap %s was never stored (outcomes %v)", name, seen)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	cert, err := tls.X509KeyPair(certs.ClientCertPEM, certs.ClientKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	client := func() *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	}
	post := func(ctx context.Context, c *http.Client, body io.Reader, length int64) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	// Bodies of 1 GiB, produced as they are sent: the client sends no more than the
	// receiver reads plus what the connection buffers. The one with a Content-Length is
	// not JSON: read, it would be answered 400; refused unread, 413. The chunked one is
	// an EventList (100,000 events of 10 KiB), read up to the limit.
	for _, tc := range []struct {
		name     string
		declared bool
	}{
		{"Content-Length", true},
		{"chunked", false},
	} {
		var body interface {
			io.Reader
			sent() int64
		} = &batchReader{n: 100_000, objBytes: 5 << 10, sampleEvery: 1 << 62}
		length := int64(-1)
		if tc.declared {
			body, length = &garbage{}, 1<<30
		}
		before := seen.get(OutcomeTooLarge)
		resp := post(ctx, client(), body, length)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: answered %s, want 413", tc.name, resp.Status)
		}
		if read := body.sent(); read > 16<<20 {
			t.Errorf("%s: the client sent %d KiB of the body before the answer, want at most 16 MiB", tc.name, read>>10)
		}
		if n := seen.get(OutcomeTooLarge) - before; n != 1 {
			t.Errorf("%s: counted %d requests too_large, want 1", tc.name, n)
		}
		t.Logf("%s: %s after the client sent %d KiB of the body", tc.name, resp.Status, body.sent()>>10)
	}
	create("while-too-large")
	waitStored("while-too-large")
	if n := store.len(); n != 1 {
		t.Errorf("%d events stored, want the apiserver's 1: a refused body was stored", n)
	}

	// Two batches in Store take both slots.
	gate, entered := make(chan struct{}), make(chan struct{}, 8)
	store.gmu.Lock()
	store.gate, store.entered = gate, entered
	store.gmu.Unlock()
	small := list(event(`"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps",
		"user":{"username":"dev-b@example.com"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},
		"responseStatus":{"metadata":{},"code":201}`))
	held := make(chan int, 2)
	for range 2 {
		go func() { held <- post(ctx, client(), strings.NewReader(small), int64(len(small))).StatusCode }()
	}
	for range 2 {
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatal("two batches never reached Store")
		}
	}
	// Answered at once: a receiver that admitted it would hold it in Store.
	third, thirdCancel := context.WithTimeout(ctx, 10*time.Second)
	defer thirdCancel()
	resp := post(third, client(), strings.NewReader(small), int64(len(small)))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a third request while two are under way: %s, Retry-After %q; want 503, Retry-After 1", resp.Status, resp.Header.Get("Retry-After"))
	}
	// The apiserver's next batch is refused as busy too...
	create("while-busy")
	busyCtx, busyCancel := context.WithTimeout(ctx, 30*time.Second)
	defer busyCancel()
	for seen.get(OutcomeBusy) < 2 {
		select {
		case <-busyCtx.Done():
			t.Fatalf("the apiserver's batch was never refused as busy (outcomes %v)", seen)
		case <-time.After(20 * time.Millisecond):
		}
	}
	store.gmu.Lock()
	store.gate = nil
	store.gmu.Unlock()
	close(gate)
	for range 2 {
		if code := <-held; code != http.StatusOK {
			t.Errorf("a batch held in Store was answered %d, want 200", code)
		}
	}
	// ...and sent again after Retry-After, once the slots are free.
	waitStored("while-busy")
	t.Logf("outcomes: %v", seen)

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// A caller that stops sending its body loses its place after BodyTimeout, so a stalled
// connection cannot hold the receiver's slots for ever; a Store that takes longer than
// BodyTimeout, once the body is in, is not cut short by it.
func TestACallerThatStallsMidBodyLosesItsPlaceButASlowStoreDoesNot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	store := &gatedStore{}
	r := &Receiver{Addr: "127.0.0.1:0", CertFile: certs.CertFile, KeyFile: certs.KeyFile, Token: "tok", Store: store,
		MaxInFlight: 1, BodyTimeout: timeout}
	ln, err := r.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Serve(ctx, ln) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(body io.Reader) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ln.Addr().String()+"/audit", body)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	small := list(event(`"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps",
		"user":{"username":"dev-b@example.com"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},
		"responseStatus":{"metadata":{},"code":201}`))

	// Half a body, then nothing: the receiver reads it, so it holds the one place.
	pr, pw := io.Pipe()
	defer pw.Close()
	stalled := make(chan error, 1)
	go func() { _, err := post(pr); stalled <- err }()
	if _, err := pw.Write([]byte(small[:len(small)/2])); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for {
		code, err := post(strings.NewReader(small))
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("answered %d while a stalled body holds the place, want 503 then 200", code)
		}
		if time.Since(began) > 10*timeout {
			t.Fatalf("the stalled body still holds the place after %v (BodyTimeout %v)", time.Since(began), timeout)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("the stalled body's place came free after %v", time.Since(began).Round(10*time.Millisecond))

	// A Store held for twice BodyTimeout after the whole body came: still answered 200.
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	store.gmu.Lock()
	store.gate, store.entered = gate, entered
	store.gmu.Unlock()
	slow := make(chan int, 1)
	go func() { code, _ := post(strings.NewReader(small)); slow <- code }()
	<-entered
	time.AfterFunc(2*timeout, func() { close(gate) })
	if code := <-slow; code != http.StatusOK {
		t.Errorf("a Store that took %v answered %d, want 200", 2*timeout, code)
	}
}
