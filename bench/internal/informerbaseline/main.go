// Command informerbaseline is baseline B of the kube-cdc benchmarks (see bench/doc.go):
// the program a team would write by hand. A client-go typed SharedInformerFactory watches
// the ConfigMaps of one namespace, and its event handler writes each added or updated
// object at once, one write per event: with -dsn, one autocommit INSERT … ON CONFLICT
// upsert on one pgx connection; with -kafka, one synchronous kafka-go Writer produce
// (acks from all replicas, batches of one) keyed namespace/name, with the object's RV in
// a "kube-cdc.rv" header as kube-cdc writes it. It keeps no change log, no checkpoint and
// no tombstones: per change it does less than kube-cdc.
//
// With -raw there is no informer: one watch request of -resource, a core-group resource
// (ConfigMaps by default; pods at the cluster benchmark), with no resourceVersion (so the
// apiserver begins with the objects as they are), its events decoded as they arrive into
// their metadata and raw object (managedFields and all), and written as above; a watch
// the apiserver ends is opened again from the last RV. That is about the least a program can
// do per change and still write it: the floor of a watcher of the same API and sink on
// the same machine.
//
// It exits 0 once -expect objects have been written (-expect 0: on SIGTERM or SIGINT),
// printing one line: "done upserts=N elapsed=D heap_bytes=H" (heap after a GC, with the
// informer's cache full).
//
// It is a program of its own so that its CPU time (rusage) is its own.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file")
	flag.StringVar(&o.namespace, "namespace", "", "namespace to watch")
	flag.StringVar(&o.dsn, "dsn", "", "PostgreSQL DSN (this or -kafka)")
	flag.StringVar(&o.kafka, "kafka", "", "Kafka broker address (this or -dsn)")
	flag.StringVar(&o.topic, "topic", "", "Kafka topic, with -kafka")
	flag.BoolVar(&o.raw, "raw", false, "a watch request read as it arrives, no informer")
	flag.StringVar(&o.resource, "resource", "configmaps", "with -raw: the core-group resource to watch")
	flag.IntVar(&o.expect, "expect", 0, "exit after this many writes; 0: on SIGTERM")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "informerbaseline:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, namespace, dsn, kafka, topic string
	raw                                      bool
	resource                                 string
	expect                                   int
	timeout                                  time.Duration
}

const upsert = `INSERT INTO informer_objects (namespace, name, uid, resource_version, object, updated_at)
VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (namespace, name) DO UPDATE SET uid = excluded.uid,
  resource_version = excluded.resource_version, object = excluded.object, updated_at = now()
WHERE informer_objects.resource_version < excluded.resource_version`

// write stores one object (its metadata, RV and JSON) in the sink.
type write func(ctx context.Context, namespace, name, uid string, rv int64, obj []byte) error

func postgres(ctx context.Context, dsn string) (write, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS informer_objects (
		namespace text NOT NULL, name text NOT NULL, uid text NOT NULL,
		resource_version bigint NOT NULL, object jsonb NOT NULL, updated_at timestamptz NOT NULL,
		PRIMARY KEY (namespace, name))`); err != nil {
		conn.Close(context.Background())
		return nil, nil, err
	}
	return func(ctx context.Context, namespace, name, uid string, rv int64, obj []byte) error {
		_, err := conn.Exec(ctx, upsert, namespace, name, uid, rv, obj)
		return err
	}, func() { conn.Close(context.Background()) }, nil
}

func kafkaWriter(addr, topic string) (write, func()) {
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1, BatchTimeout: time.Millisecond}
	return func(ctx context.Context, namespace, name, _ string, rv int64, obj []byte) error {
		return w.WriteMessages(ctx, kafka.Message{Key: []byte(namespace + "/" + name), Value: obj,
			Headers: []kafka.Header{{Key: "kube-cdc.rv", Value: strconv.AppendInt(nil, rv, 10)}}})
	}, func() { _ = w.Close() }
}

func run(o options) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	stop, unstop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer unstop()
	var store write
	var closeStore func()
	switch {
	case o.dsn != "" && o.kafka == "":
		var err error
		if store, closeStore, err = postgres(ctx, o.dsn); err != nil {
			return err
		}
	case o.kafka != "" && o.dsn == "" && o.topic != "":
		store, closeStore = kafkaWriter(o.kafka, o.topic)
	default:
		return errors.New("give -dsn, or -kafka and -topic")
	}
	if !o.raw && o.resource != "configmaps" {
		return errors.New("-resource needs -raw: the informer is ConfigMaps'")
	}
	defer closeStore()
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100 // kube-cdc's defaults
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	var n atomic.Int64
	put := func(namespace, name, uid string, rv int64, obj []byte) {
		if err := store(ctx, namespace, name, uid, rv, obj); err != nil {
			fail(err)
			return
		}
		if n.Add(1) == int64(o.expect) {
			close(done)
		}
	}
	var finish func()
	if o.raw {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			if err := watchRaw(stop, cs, o.namespace, o.resource, put); err != nil && stop.Err() == nil {
				fail(err)
			}
		}()
		finish = func() { <-watched }
	} else {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(o.namespace))
		inf := f.Core().V1().ConfigMaps().Informer()
		handle := func(obj any) {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok {
				return
			}
			c := cm.DeepCopy()
			c.ManagedFields = nil // kube-cdc drops them too
			b, err := json.Marshal(c)
			var rv int64
			if err == nil {
				rv, err = strconv.ParseInt(c.ResourceVersion, 10, 64)
			}
			if err != nil {
				fail(err)
				return
			}
			put(c.Namespace, c.Name, string(c.UID), rv, b)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, obj any) { handle(obj) },
		}); err != nil {
			return err
		}
		f.Start(stop.Done())
		finish = f.Shutdown
	}
	select {
	case <-done:
	case err := <-errc:
		return err
	case <-stop.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d writes within %v", n.Load(), o.expect, o.timeout)
		}
		finish()
	}
	elapsed := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("done upserts=%d elapsed=%s heap_bytes=%d\n", n.Load(), elapsed, ms.HeapAlloc)
	return nil
}

// watchRaw reads the objects of resource (core group) in namespace ("": all) from one
// watch request at a time and hands each ADDED or MODIFIED object to put, until ctx ends
// or the watch fails.
func watchRaw(ctx context.Context, cs kubernetes.Interface, namespace, resource string, put func(namespace, name, uid string, rv int64, obj []byte)) error {
	rv := ""
	for ctx.Err() == nil {
		req := cs.CoreV1().RESTClient().Get().Namespace(namespace).Resource(resource).
			Param("watch", "true")
		if rv != "" {
			req = req.Param("resourceVersion", rv)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(body)
		for {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				body.Close()
				if errors.Is(err, io.EOF) || ctx.Err() != nil {
					break // the apiserver ended the watch: open it again from rv
				}
				return err
			}
			if ev.Type == "ERROR" {
				body.Close()
				return fmt.Errorf("watch: %s", ev.Object)
			}
			var meta struct {
				Metadata struct {
					Namespace, Name, UID, ResourceVersion string
				} `json:"metadata"`
			}
			if err := json.Unmarshal(ev.Object, &meta); err != nil {
				body.Close()
				return err
			}
			m := meta.Metadata
			rv = m.ResourceVersion
			if ev.Type != "ADDED" && ev.Type != "MODIFIED" {
				continue
			}
			v, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
			if err != nil {
				body.Close()
				return err
			}
			put(m.Namespace, m.Name, m.UID, v, ev.Object)
		}
	}
	return nil
}
