package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// crashingSink stands for a process killed part-way through a relist: its write number
// `after`+1 fails terminally, so the pipeline stops with the earlier writes committed.
type crashingSink struct {
	pipeline.Sink
	after, writes int
}

var errCrash = errors.New("simulated crash")

func (s *crashingSink) Write(ctx context.Context, b change.Batch) error {
	if s.writes++; s.writes > s.after {
		return retry.Terminal(errCrash)
	}
	return s.Sink.Write(ctx, b)
}

// Against a real apiserver and PostgreSQL: a relist cut short by a crash leaves the
// checkpoint where it was, so the next start relists and the sink converges. The
// ConfigMaps are named so that the LIST (in key order) returns the newest first: had the
// first relist batch advanced the checkpoint to the RVs it held, the restart would watch
// from past every object not yet listed and never see them.
func TestARelistCutShortByACrashIsRepeatedAndLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)

	const n = 30
	ns := "relist-crash"
	cs := kube.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", n-1-i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	clients, err := source.NewClients(rest.CopyConfig(kube.Config), source.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets, err := source.Resolve(clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: []string{ns}}})
	if err != nil {
		t.Fatal(err)
	}
	tg := targets[0]
	log := slog.New(slog.DiscardHandler)
	newPipeline := func(s pipeline.Sink) *pipeline.Pipeline {
		return pipeline.New(pipeline.Options{Cluster: "test", BatchSize: 5, Log: log,
			Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}},
			[]pipeline.Sink{s}, pipeline.Targets(pipeline.Fixture{Resource: tg.Resource, Owns: tg.Owns(), NewStream: func() pipeline.Streamer {
				return &source.Stream{Clients: clients, Target: tg, PageSize: 4, Log: log}
			}}))
	}
	openSink := func() *postgres.Sink {
		s, err := postgres.New(ctx, "warehouse", "test", postgres.Options{DSN: dsn, Migrate: true}, log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	first := openSink()
	if err := newPipeline(&crashingSink{Sink: first, after: 1}).Run(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("first run ended with %v, want the simulated crash", err)
	}
	ck, err := first.Checkpoint(ctx, tg.Resource)
	if err != nil {
		t.Fatal(err)
	}
	live := countLive(ctx, t, first, tg.Resource)
	first.Close()
	if live != 5 {
		t.Fatalf("the crash left %d rows, want the first batch's 5 (the test no longer crashes mid-relist)", live)
	}
	if ck != 0 {
		t.Errorf("a relist cut short moved the checkpoint to %v; it must stay at 0 until the relist ends", ck)
	}

	second := openSink()
	defer second.Close()
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- newPipeline(second).Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for countLive(ctx, t, second, tg.Resource) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the sink holds %d of %d objects", countLive(ctx, t, second, tg.Resource), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func countLive(ctx context.Context, t *testing.T, s *postgres.Sink, res change.Resource) int {
	t.Helper()
	n := 0
	if err := s.KeyIndex(ctx, res, func(change.Key, change.Entry) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
