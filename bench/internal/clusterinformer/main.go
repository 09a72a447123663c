// Command clusterinformer is baseline B of the cluster-scale benchmarks (see bench/doc.go):
// informerbaseline's program for many resources at once, as a team would write it by
// hand. One client-go SharedInformerFactory serves a typed informer per resource
// (factory.ForResource), and one event handler does one autocommit INSERT … ON CONFLICT
// upsert per event on one pgx connection. It exits 0 once -expect objects have been
// added, printing one line: "done upserts=N elapsed=D heap_bytes=H" (heap after a GC,
// with every informer's cache full).
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	kruntime "k8s.io/apimachinery/pkg/runtime"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	resources := flag.String("resources", "", "comma-separated group/version/resource (\"/v1/pods\" for the core group)")
	dsn := flag.String("dsn", "", "PostgreSQL DSN")
	expect := flag.Int("expect", 0, "exit after this many objects were added")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*kubeconfig, *resources, *dsn, *expect, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "clusterinformer:", err)
		os.Exit(1)
	}
}

const upsert = `INSERT INTO informer_objects (resource, namespace, name, uid, resource_version, object, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, now())
ON CONFLICT (resource, namespace, name) DO UPDATE SET uid = excluded.uid,
  resource_version = excluded.resource_version, object = excluded.object, updated_at = now()
WHERE informer_objects.resource_version < excluded.resource_version`

func run(kubeconfig, resources, dsn string, expect int, timeout time.Duration) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS informer_objects (
		resource text NOT NULL, namespace text NOT NULL, name text NOT NULL, uid text NOT NULL,
		resource_version bigint NOT NULL, object jsonb NOT NULL, updated_at timestamptz NOT NULL,
		PRIMARY KEY (resource, namespace, name))`); err != nil {
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
	f := informers.NewSharedInformerFactory(cs, 0)

	// Handlers of different informers run concurrently; the one connection is not.
	var mu sync.Mutex
	done := make(chan struct{})
	errc := make(chan error, 1)
	added, upserts := 0, 0
	handle := func(resource string, obj any, add bool) {
		ro, ok := obj.(kruntime.Object)
		if !ok {
			return
		}
		c := ro.DeepCopyObject()
		m, err := meta.Accessor(c)
		if err != nil {
			return
		}
		m.SetManagedFields(nil) // kube-cdc drops them too
		b, err := json.Marshal(c)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			_, err = conn.Exec(ctx, upsert, resource, m.GetNamespace(), m.GetName(), string(m.GetUID()), rv, b)
		}
		if err != nil {
			select {
			case errc <- err:
			default:
			}
			return
		}
		upserts++
		if add {
			if added++; added == expect {
				close(done)
			}
		}
	}
	for _, r := range strings.Split(resources, ",") {
		parts := strings.Split(r, "/")
		if len(parts) != 3 {
			return fmt.Errorf("resource %q: want group/version/resource", r)
		}
		gvr := schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		gi, err := f.ForResource(gvr)
		if err != nil {
			return fmt.Errorf("informer for %s: %w", r, err)
		}
		if _, err := gi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { handle(gvr.Resource, obj, true) },
			UpdateFunc: func(_, obj any) { handle(gvr.Resource, obj, false) },
		}); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	select {
	case <-done:
	case err := <-errc:
		return err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("only %d of %d objects added within %v", added, expect, timeout)
	}
	elapsed := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mu.Lock()
	n := upserts
	mu.Unlock()
	fmt.Printf("done upserts=%d elapsed=%s heap_bytes=%d\n", n, elapsed, ms.HeapAlloc)
	return nil
}
