package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// Issue 12 end to end, in process, against a real kube-apiserver and PostgreSQL: a
// ConfigMap whose value holds a NUL byte (legal in Kubernetes; the apiserver serves it
// as \u0000) used to stop kube-cdc at every start. Now the relist stores every other
// ConfigMap and quarantines it; the stream goes on (later ConfigMaps land, the
// checkpoint moves); a good ConfigMap turned poison and then deleted ends deleted in
// objects; the poison ConfigMap, fixed, lands in objects.
func TestAConfigMapWithANulByteIsQuarantinedAndTheStreamGoesOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	dsn := pg.NewDatabase(t)
	cs := kube.Clientset()
	const ns = "poison"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	configMaps := cs.CoreV1().ConfigMaps(ns)
	put := func(name, value string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": value}}
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err == nil {
			return
		}
		if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("good-%d", i), "clean")
	}
	put("poison", "before\x00after")
	put("good-5", "clean")

	clients, err := source.NewClients(rest.CopyConfig(kube.Config), source.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets, err := source.Resolve(clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: []string{ns}}})
	if err != nil {
		t.Fatal(err)
	}
	tg := targets[0]
	warns := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), warns), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(ctx, "warehouse", cluster, Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	metrics := &countingMetrics{}
	s.SetMetrics(metrics)
	p := pipeline.New(pipeline.Options{Cluster: cluster, Log: log,
		Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}},
		[]pipeline.Sink{s}, []pipeline.Target{targetOf(tg, func() *source.Stream {
			return &source.Stream{Clients: clients, Target: tg, Log: log}
		})})
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(rctx) }()
	running := func() {
		t.Helper()
		select {
		case err := <-errc:
			t.Fatalf("the pipeline stopped: %v", err)
		default:
		}
	}

	conn := connect(t, dsn)
	value := func(name string) (v string, deleted bool, ok bool) {
		err := conn.QueryRow(ctx, `SELECT coalesce(object->'data'->>'v', '<null>'), deleted_at IS NOT NULL FROM kube_cdc.objects
			WHERE cluster = $1 AND resource = 'configmaps' AND namespace = $2 AND name = $3`, cluster, ns, name).Scan(&v, &deleted)
		if err != nil {
			return "", false, false
		}
		return v, deleted, true
	}
	unresolved := func(name string) int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.quarantine
			WHERE namespace = $1 AND name = $2 AND resolved_at IS NULL`, ns, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, 30*time.Second, "every good ConfigMap is in objects and the poison one in quarantine", func() bool {
		running()
		for i := range 6 {
			if v, _, ok := value(fmt.Sprintf("good-%d", i)); !ok || v != "clean" {
				return false
			}
		}
		return unresolved("poison") == 1
	})
	if _, _, ok := value("poison"); ok {
		t.Error("the poison ConfigMap has an objects row")
	}
	var raw []byte
	if err := conn.QueryRow(ctx, `SELECT raw FROM kube_cdc.quarantine WHERE name = 'poison'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"v":"before\u0000after"`)) {
		t.Errorf("quarantined raw bytes %s lack the value as the apiserver sent it", raw)
	}

	// The stream goes on: a ConfigMap made after the poison one lands, and so does a
	// good one turned poison and then deleted (its delete carries the poison).
	put("good-6", "clean")
	put("good-0", "now\x00bad")
	if err := configMaps.Delete(ctx, "good-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	latest, err := configMaps.Get(ctx, "good-6", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "good-6 lands and good-0 is deleted", func() bool {
		running()
		v, _, ok := value("good-6")
		_, deleted, _ := value("good-0")
		return ok && v == "clean" && deleted
	})
	if v, _, _ := value("good-0"); v != "clean" {
		t.Errorf("deleted good-0 holds %q, want its last good state", v)
	}
	rv, err := change.ParseRV(latest.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the checkpoint passes good-6", func() bool {
		running()
		ck, err := s.Checkpoint(ctx, tg.Resource)
		return err == nil && ck >= rv
	})

	// Fixed, the poison ConfigMap lands and its quarantine row is resolved.
	put("poison", "fixed")
	eventually(t, 30*time.Second, "the fixed ConfigMap lands in objects", func() bool {
		running()
		v, _, ok := value("poison")
		return ok && v == "fixed" && unresolved("poison") == 0
	})
	if got := metrics.get("warehouse/configmaps"); got < 3 {
		t.Errorf("metrics hook counted %d quarantined, want at least 3 (poison, good-0's update and delete)", got)
	}
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
