package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 24: /readyz used to answer 200 as soon as every cursor had a checkpoint, before
// a resource's stream had resumed (or its relist, after a jittered delay, had run). Ready
// now means every resource's stream is established: its watch was accepted from the
// point it started from and what came before is written. A restart whose watches the
// apiserver does not answer yet (held by a proxy in front of it) is not ready, whatever
// its checkpoints; once they are answered, it is, and a change made meanwhile is written.
func TestReadyzWaitsUntilEveryStreamHasResumedFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "ready")
	dsn := pg.NewDatabase(t)
	cms := kube.Clientset().CoreV1().ConfigMaps(ns)
	for i := range 3 {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The first run syncs and checkpoints.
	d := start(t, "run", "-c", writeConfig(t, opsConfigYAML(dsn, ns, "", "")))
	waitSynced(t, dsn)
	stopOK(t, d)

	// The second run talks through a proxy that holds its watches until released.
	var mu sync.Mutex
	held := 0
	release := make(chan struct{})
	proxy := apiProxy(t, kube.Config, func(r *http.Request) func() {
		if r.URL.Query().Get("watch") != "true" || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps") {
			return nil
		}
		mu.Lock()
		held++
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return nil
	})
	addr := opsFreeAddr(t)
	cfg := strings.ReplaceAll(opsConfigYAML(dsn, ns, addr, ""), kube.Kubeconfig, proxy)
	d = start(t, "run", "-c", writeConfig(t, cfg))
	eventually(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if held == 0 {
			return fmt.Errorf("no watch request reached the proxy yet")
		}
		if _, _, err := opsGet("http://" + addr + "/readyz"); err != nil {
			return err
		}
		return nil
	})
	code, body, err := opsGet("http://" + addr + "/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "not resumed") {
		t.Errorf("/readyz while the watch is held: %d %q %v; want 503 saying the stream has not resumed", code, body, err)
	}

	if _, err := cms.Create(ctx, configMap(ns, "meanwhile", map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	close(release)
	eventually(t, 60*time.Second, func() error {
		code, body, err := opsGet("http://" + addr + "/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/readyz: %d %s", code, body)
		}
		return err
	})
	conn := connect(t, dsn)
	eventually(t, 30*time.Second, func() error {
		if n := count(t, conn, `SELECT count(*) FROM kube_cdc.objects WHERE namespace = $1 AND name = 'meanwhile'`, ns); n != 1 {
			return fmt.Errorf("the change made while the watch was held is not written")
		}
		return nil
	})
	stopOK(t, d)
}
