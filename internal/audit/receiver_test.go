package audit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

type memStore struct {
	mu     sync.Mutex
	events []Event
	fail   error
}

func (s *memStore) Store(_ context.Context, events []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.events = append(s.events, events...)
	return nil
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

func TestTheReceiverStoresBatchesOfAuthenticatedCallersOnlyAndAnswers2xxOnlyOnceStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &memStore{}
	r := &Receiver{Addr: "127.0.0.1:0", CertFile: certs.CertFile, KeyFile: certs.KeyFile, ClientCAFile: certs.CAFile,
		Token: "s3cret-token", Store: store}
	ln, err := r.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	url := "https://" + ln.Addr().String() + "/audit"

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	client := func(withCert bool) *http.Client {
		cfg := &tls.Config{RootCAs: pool}
		if withCert {
			c, err := tls.X509KeyPair(certs.ClientCertPEM, certs.ClientKeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	batch := list(event(`"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps",
		"user":{"username":"dev-a@example.com"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},
		"responseStatus":{"metadata":{},"code":201},"responseObject":{"kind":"ConfigMap","metadata":{"uid":"u","resourceVersion":"5"}}`))
	post := func(c *http.Client, token, body string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name      string
		cert      bool
		token     string
		body      string
		fail      error
		code      int
		storedNow int
	}{
		{"no credentials", false, "", batch, nil, 401, 0},
		{"a wrong token", false, "guess", batch, nil, 401, 0},
		{"a client certificate", true, "", batch, nil, 200, 1},
		{"the token", false, "s3cret-token", batch, nil, 200, 2},
		{"a malformed body", true, "", `{"items": [`, nil, 400, 2},
		{"a store that fails", true, "", batch, errors.New("database down"), 503, 2},
	} {
		store.mu.Lock()
		store.fail = tc.fail
		store.mu.Unlock()
		if code := post(client(tc.cert), tc.token, tc.body); code != tc.code {
			t.Errorf("%s: answered %d, want %d", tc.name, code, tc.code)
		}
		if n := store.len(); n != tc.storedNow {
			t.Errorf("%s: %d events stored, want %d", tc.name, n, tc.storedNow)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
