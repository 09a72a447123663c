package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/ignorepaths"
)

var nodes = change.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}

// nodeChange is a ~4 KB Node as a kubelet's status report leaves it: five conditions
// whose lastHeartbeatTime is beat, and a list of images.
func nodeChange(name string, rv change.RV, op change.Op, beat int) change.Change {
	var conds []string
	for _, t := range []string{"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready"} {
		conds = append(conds, fmt.Sprintf(`{"type":%q,"status":"False","reason":"KubeletHasSufficient%s","message":"kubelet has sufficient %s available",`+
			`"lastHeartbeatTime":"2026-11-27T05:%02d:%02dZ","lastTransitionTime":"2026-11-27T00:00:00Z"}`, t, t, t, beat/60%60, beat%60))
	}
	var images []string
	for i := range 20 {
		images = append(images, fmt.Sprintf(`{"names":["registry.example/team/image-%d@sha256:%064d","registry.example/team/image-%d:v1.%d"],"sizeBytes":%d}`, i, i, i, i, 1e7+i))
	}
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"uid":"uid-%s","resourceVersion":"%d",`+
		`"labels":{"kubernetes.io/hostname":%q,"kubernetes.io/os":"linux"}},"spec":{"podCIDR":"10.0.0.0/24"},`+
		`"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"conditions":[%s],"images":[%s],`+
		`"nodeInfo":{"kubeletVersion":"v1.36.5","osImage":"Debian GNU/Linux 13"}}}`,
		name, name, rv, name, strings.Join(conds, ","), strings.Join(images, ","))
	return change.Change{Cluster: cluster, Resource: nodes, Key: change.Key{Name: name}, UID: "uid-" + name, RV: rv, Op: op,
		Object: json.RawMessage(obj), Labels: json.RawMessage(`{}`), ObservedAt: time.Now()}
}

// BenchmarkWriteOfHeartbeats writes nodes' heartbeat-only status updates, the noise
// ignore paths leave out of changes, with the nodes' default ignore paths and without
// any: a steady watch's batch of one update, and a batch of 1,000 (COPY). It reports the
// wall time per change (the server's and this process's).
func BenchmarkWriteOfHeartbeats(b *testing.B) {
	for _, size := range []int{1, 1000} {
		for _, ignore := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/ignorePaths=%v", size, ignore), func(b *testing.B) {
				ctx := context.Background()
				s, err := New(ctx, "warehouse", cluster, Options{DSN: pg.NewDatabase(b), Migrate: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if ignore {
					s.SetIgnorePaths(nodes, ignorepaths.For("", "nodes", nil, true))
				}
				const keys = 1000
				rv, beat := change.RV(1), 0
				var creates []change.Change
				for i := range keys {
					rv++
					creates = append(creates, nodeChange("node-"+strconv.Itoa(i), rv, change.OpCreate, 0))
				}
				if err := s.Write(ctx, change.Batch{Resource: nodes, Changes: creates, Checkpoint: rv}); err != nil {
					b.Fatal(err)
				}
				next := func() change.Batch {
					cs := make([]change.Change, size)
					for i := range cs {
						rv++
						beat++
						cs[i] = nodeChange("node-"+strconv.Itoa(beat%keys), rv, change.OpUpdate, beat/keys+1)
					}
					return change.Batch{Resource: nodes, Changes: cs, Checkpoint: rv}
				}
				for range 20 { // warm
					if err := s.Write(ctx, next()); err != nil {
						b.Fatal(err)
					}
				}
				var wall time.Duration
				b.ResetTimer()
				for range b.N {
					bt := next()
					start := time.Now()
					if err := s.Write(ctx, bt); err != nil {
						b.Fatal(err)
					}
					wall += time.Since(start)
				}
				b.StopTimer()
				b.ReportMetric(float64(wall.Microseconds())/float64(b.N*size), "µs/change")
				var rows int
				if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE op = 'update'`).Scan(&rows); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(rows)/float64((b.N+20)*size), "rows/change")
			})
		}
	}
}
