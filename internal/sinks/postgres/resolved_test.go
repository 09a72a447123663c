package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/change"
	checkpointstore "github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/retry"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/source"
	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// A resource nobody touches still has its watermark move, in PostgreSQL (the resolved
// view) and in Kafka (resolved records): the apiserver's watch bookmarks carry the
// stream past changes elsewhere in the cluster, and the pipeline hands each bookmark to
// the sinks as a batch without changes. The apiserver sends a bookmark about once a
// minute, and 2 s before a watch's timeout: watches of 3 s here bring one every few
// seconds instead of every minute.
func TestAQuietResourcesWatermarkAdvancesOnBookmarksInPostgresAndKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := testenv.NewKube(t, testenv.KubeOptions{})
	k := testenv.NewKafka(t)
	dsn := pg.NewDatabase(t)
	cs := kube.Clientset()
	for _, ns := range []string{"quiet", "busy"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clients, err := source.NewClients(rest.CopyConfig(kube.Config), source.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets, err := source.Resolve(clients.Discovery, []source.Spec{{Name: "configmaps", Namespaces: []string{"quiet"}}})
	if err != nil {
		t.Fatal(err)
	}
	tg := targets[0]
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	warehouse, err := New(ctx, "warehouse", cluster, Options{DSN: dsn, Migrate: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer warehouse.Close()
	store, err := checkpointstore.OpenFile(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := kafka.New(ctx, "stream", cluster, kafka.Options{Brokers: []string{k.Addr()}, CreateTopics: true,
		ResolvedInterval: 100 * time.Millisecond}, store, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	p := pipeline.New(pipeline.Options{Cluster: cluster, Log: log, Backoff: retry.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}},
		[]pipeline.Sink{warehouse, stream}, []pipeline.Target{targetOf(tg, func() *source.Stream {
			return &source.Stream{Clients: clients, Target: tg, Log: log, WatchTimeout: 3 * time.Second}
		})})
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(rctx) }()

	conn := connect(t, dsn)
	pgWatermark := func() (rv change.RV, at time.Time) {
		t.Helper()
		select {
		case err := <-errc:
			t.Fatalf("the pipeline stopped: %v", err)
		default:
		}
		err := conn.QueryRow(ctx, `SELECT resolved_rv, resolved_at FROM kube_cdc.resolved
			WHERE cluster = $1 AND sink = 'warehouse' AND api_group = '' AND resource = 'configmaps' AND scope = $2 AND epoch = 0`,
			cluster, tg.Resource.Scope).Scan(&rv, &at)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return rv, at
	}
	resolvedTopic := kafka.ResolvedTopicName("", "", cluster, tg.Resource)
	kafkaWatermark := func() change.RV {
		t.Helper()
		msgs, err := k.ReadAll(ctx, resolvedTopic)
		if err != nil || len(msgs) == 0 {
			return 0
		}
		var v struct {
			ResolvedRV string `json:"resolvedRV"`
			Resource   string `json:"resource"`
			Scope      string `json:"scope"`
		}
		m := msgs[len(msgs)-1]
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatalf("resolved record %s: %v", m.Value, err)
		}
		if v.Resource != "configmaps" || v.Scope != tg.Resource.Scope {
			t.Fatalf("resolved record %s is not of the configmaps stream", m.Value)
		}
		rv, err := change.ParseRV(v.ResolvedRV)
		if err != nil {
			t.Fatal(err)
		}
		return rv
	}
	eventually(t, 30*time.Second, "both sinks resolve the initial sync", func() bool {
		rv, _ := pgWatermark()
		return rv > 0 && kafkaWatermark() > 0
	})
	rows := func() int { return count(t, dsn, `SELECT count(*) FROM kube_cdc.changes WHERE namespace = 'quiet'`) }
	records := func() int {
		msgs, err := k.ReadAll(ctx, kafka.TopicName("", cluster, tg.Resource))
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	rowsBefore, recordsBefore := rows(), records()
	_, atBefore := pgWatermark()

	// Changes in another namespace only: the quiet stream sees none of them.
	var first change.RV
	began := time.Now()
	touches := 0
	var last time.Time
	eventually(t, 30*time.Second, "both watermarks pass a change made elsewhere", func() bool {
		if time.Since(last) < 200*time.Millisecond {
			rv, _ := pgWatermark()
			return first > 0 && rv >= first && kafkaWatermark() >= first
		}
		last = time.Now()
		touches++
		cm, err := cs.CoreV1().ConfigMaps("busy").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
			Data: map[string]string{"n": strconv.Itoa(touches)}}, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first, _ = change.ParseRV(cm.ResourceVersion)
		}
		rv, _ := pgWatermark()
		return rv >= first && kafkaWatermark() >= first
	})
	t.Logf("both watermarks passed RV %d %v after the first change elsewhere (%d changes made)", first, time.Since(began).Round(time.Millisecond), touches)
	if _, at := pgWatermark(); !at.After(atBefore) {
		t.Errorf("resolved_at %v did not move past %v", at, atBefore)
	}
	if got := rows(); got != rowsBefore {
		t.Errorf("the quiet namespace has %d changes rows, had %d: bookmarks must write none", got, rowsBefore)
	}
	if got := records(); got != recordsBefore {
		t.Errorf("the data topic holds %d records, held %d: bookmarks must write none", got, recordsBefore)
	}
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
