package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventsSecondsEnv sets each arm of BenchmarkEventsCapture, in seconds (default 60).
const EventsSecondsEnv = "KUBE_CDC_BENCH_EVENTS_SECONDS"

// eventsRate is the Kubernetes Events written per second: a busy cluster's (a rollout of
// a few hundred pods, a crash loop or two).
const eventsRate = 50

// BenchmarkEventsCapture: what capturing Kubernetes Events costs (issue 31), at
// eventsRate events/s for EventsSecondsEnv seconds into the durable PostgreSQL
// (fsync on), a new database per arm: one in five writes creates an event, the others
// repeat one (count + 1, lastTimestamp), as the kubelet's and the controllers' recorders
// do. Arms: "table" (sinks[].postgres.events.table, the default: one events row per
// event, updated in place) and "versioned" (table: false, objects and changes rows like
// any resource). For each: PostgreSQL CPU (the postmaster's tree less this benchmark's
// backend) and WAL per event, and kube-cdc's own CPU per event and per second.
func BenchmarkEventsCapture(b *testing.B) {
	dur := 60 * time.Second
	if v := os.Getenv(EventsSecondsEnv); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s <= 0 {
			b.Fatalf("%s=%q: want a number of seconds", EventsSecondsEnv, v)
		}
		dur = time.Duration(s) * time.Second
	}
	db := durablePostgres(b)
	for _, arm := range []string{"table", "versioned"} {
		b.Run("arm="+arm, func(b *testing.B) {
			ctx := context.Background()
			ns := fmt.Sprintf("bench-events-%s-%d", arm, time.Now().UnixNano()%100000)
			if _, err := kube.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
				metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			dsn := db.newDatabase(b)
			cfg := strings.Replace(pgDaemonConfigLevel(dsn, ns, "info"), "  - name: configmaps\n", "  - name: events\n", 1)
			cfg = strings.Replace(cfg, "      dsn: ", fmt.Sprintf("      events: {table: %v}\n      dsn: ", arm == "table"), 1)
			d := startDaemon(b, cfg)
			defer func() {
				d.stop(b)
				dropDatabase(b, db, dsn)
			}()
			stats := connect(b, dsn)
			eventsCheckpoint := func() int64 {
				var rv int64
				err := stats.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0) FROM kube_cdc.checkpoints WHERE resource = 'events'`).Scan(&rv)
				if err != nil && !strings.Contains(err.Error(), "does not exist") {
					b.Fatal(err)
				}
				return rv
			}
			waitRV := func(rv int64) {
				deadline := time.Now().Add(2 * time.Minute)
				for eventsCheckpoint() < rv {
					if time.Now().After(deadline) {
						b.Fatalf("the events checkpoint did not reach %d within 2m\n%s", rv, readTail(d.logPath))
					}
					d.failIfExited(b)
					time.Sleep(50 * time.Millisecond)
				}
			}
			waitRV(1)
			var statsPID int
			if err := stats.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&statsPID); err != nil {
				b.Fatal(err)
			}
			pgCPU := func() float64 { return treeCPU(db.cmd.Process.Pid, childrenOf()) - cpuNow(statsPID) }
			var lsn0 string
			if err := stats.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
				b.Fatal(err)
			}
			pg0, kc0, t0 := pgCPU(), cpuNow(d.cmd.Process.Pid), time.Now()
			n, lastRV := writeEvents(b, ns, dur)
			waitRV(lastRV)
			wall := time.Since(t0).Seconds()
			pgc, kcc := pgCPU()-pg0, cpuNow(d.cmd.Process.Pid)-kc0
			var wal float64
			if err := stats.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&wal); err != nil {
				b.Fatal(err)
			}
			var rows, changes int64
			if arm == "table" {
				_ = stats.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.events`).Scan(&rows)
			}
			_ = stats.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE resource = 'events'`).Scan(&changes)
			b.ReportMetric(pgc/float64(n)*1e6, "pgcpu_µs/event")
			b.ReportMetric(wal/float64(n), "wal_B/event")
			b.ReportMetric(kcc/float64(n)*1e6, "kubecdc_cpu_µs/event")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d events written in %.0f s (%.1f/s; %d events rows, %d changes rows): PostgreSQL CPU %.0f µs and WAL %.0f B per event (%.3f CPU s/s), kube-cdc CPU %.0f µs per event (%.3f CPU s/s); load %s",
				arm, n, wall, float64(n)/wall, rows, changes, pgc/float64(n)*1e6, wal/float64(n), pgc/wall, kcc/float64(n)*1e6, kcc/wall, loadavg())
		})
	}
}

// writeEvents writes Events into ns at eventsRate for dur (a create every fifth write, a
// repeat of an earlier event otherwise) and returns how many and the last write's RV.
func writeEvents(b *testing.B, ns string, dur time.Duration) (n int, lastRV int64) {
	b.Helper()
	ctx := context.Background()
	events := kube.Clientset().CoreV1().Events(ns)
	tick := time.NewTicker(time.Second / eventsRate)
	defer tick.Stop()
	end := time.Now().Add(dur)
	var names []string
	counts := map[string]int32{}
	for time.Now().Before(end) {
		<-tick.C
		var rv string
		now := metav1.NewTime(time.Now())
		if n%5 == 0 {
			name := fmt.Sprintf("pod-%d.%x", n, n)
			ev, err := events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", n), APIVersion: "v1",
					UID: types.UID(fmt.Sprintf("uid-%d", n)), FieldPath: "spec.containers{app}"},
				Reason: "BackOff", Message: "Back-off restarting failed container app in pod " + name, Type: corev1.EventTypeWarning,
				Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 1, FirstTimestamp: now, LastTimestamp: now,
			}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			names, counts[name], rv = append(names, name), 1, ev.ResourceVersion
		} else {
			name := names[n%len(names)]
			counts[name]++
			patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, counts[name], now.UTC().Format(time.RFC3339))
			ev, err := events.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				b.Fatal(err)
			}
			rv = ev.ResourceVersion
		}
		n++
		v, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lastRV = v
	}
	return n, lastRV
}
