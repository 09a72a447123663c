// Command informerbaseline is baseline B of the kube-cdc benchmarks (see bench/doc.go): the
// program a team would write by hand. A client-go typed SharedInformerFactory watches the
// ConfigMaps of one namespace, and its event handler does one autocommit
// INSERT … ON CONFLICT upsert per event on one pgx connection. It exits 0 once -expect
// upserts have been done, printing one line: "done upserts=N elapsed=D heap_bytes=H"
// (heap after a GC, with the informer's cache full).
//
// It is a program of its own so that its CPU time (rusage) is its own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "", "namespace to watch")
	dsn := flag.String("dsn", "", "PostgreSQL DSN")
	expect := flag.Int("expect", 0, "exit after this many upserts")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *dsn, *expect, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "informerbaseline:", err)
		os.Exit(1)
	}
}

const upsert = `INSERT INTO informer_objects (namespace, name, uid, resource_version, object, updated_at)
VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (namespace, name) DO UPDATE SET uid = excluded.uid,
  resource_version = excluded.resource_version, object = excluded.object, updated_at = now()
WHERE informer_objects.resource_version < excluded.resource_version`

func run(kubeconfig, namespace, dsn string, expect int, timeout time.Duration) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS informer_objects (
		namespace text NOT NULL, name text NOT NULL, uid text NOT NULL,
		resource_version bigint NOT NULL, object jsonb NOT NULL, updated_at timestamptz NOT NULL,
		PRIMARY KEY (namespace, name))`); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100 // kube-cdc's defaults
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().ConfigMaps().Informer()
	done := make(chan struct{})
	errc := make(chan error, 1)
	n := 0
	handle := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		c := cm.DeepCopy()
		c.ManagedFields = nil // kube-cdc drops them too
		b, err := json.Marshal(c)
		if err == nil {
			var rv int64
			fmt.Sscan(c.ResourceVersion, &rv)
			_, err = conn.Exec(ctx, upsert, c.Namespace, c.Name, string(c.UID), rv, b)
		}
		if err != nil {
			select {
			case errc <- err:
			default:
			}
			return
		}
		n++
		if n == expect {
			close(done)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	select {
	case <-done:
	case err := <-errc:
		return err
	case <-ctx.Done():
		return fmt.Errorf("only %d of %d upserts within %v", n, expect, timeout)
	}
	elapsed := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("done upserts=%d elapsed=%s heap_bytes=%d\n", n, elapsed, ms.HeapAlloc)
	return nil
}
