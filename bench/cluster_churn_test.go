package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Steady churn at cluster scale: two kube-cdc processes, one into PostgreSQL and one into
// Kafka, stream the cluster while (1) every Deployment rolls out at once and (2) a paced
// writer updates pod status at 200 writes/s. Lag is measured from the apiserver's
// acknowledgement of each write to its row or record; CPU is read per process from
// /proc/PID/stat over each phase.

const (
	churnStatusRate    = 200
	churnStatusFor     = 30 * time.Second
	churnStatusWriters = 8
	churnStatusPods    = 2000 // pods the status writer cycles through
	churnTopicPrefix   = "churn"
)

// clusterChurn: the rollout wave, then pod status updates at churnStatusRate.
func clusterChurn(b *testing.B, sc *scaleCluster) {
	ctx := context.Background()
	l := listScale(b, sc)
	n := len(l.rows)
	l.rows = nil

	dsn := pg.NewDatabase(b)
	conn, pollConn := connect(b, dsn), connect(b, dsn)
	pgd := startDaemon(b, scalePostgresConfig(sc, dsn))
	kd := startDaemon(b, scaleKafkaConfig(b, sc, churnTopicPrefix))
	waitScaleSyncedPostgres(b, conn, n, 10*time.Minute, pgd)
	waitScaleRecords(b, churnTopicPrefix, int64(n), kd)
	// The floor: a raw watch of the pods writing one upsert per event into a database of
	// its own (informerbaseline -raw), what the pod status phase's changes cost at least.
	floorConn := connect(b, pg.NewDatabase(b))
	fd := startInformerOn(b, sc.Kubeconfig, scaleNS, "-raw=true", "-resource", "pods", "-dsn", floorConn.Config().ConnString())

	// Observers: every new changes row, and every record of the busy topics.
	seenPG, seenK := newSeenSet(), newSeenSet()
	fromID := maxChangeID(b, conn)
	octx, stopObservers := context.WithCancel(ctx)
	var obs sync.WaitGroup
	var pollErr error
	obs.Go(func() { pollErr = pollChangesWithGaps(octx, pollConn, fromID, seenPG) })
	for _, r := range scaleResources {
		switch r.gvr.Resource {
		case "pods", "replicasets", "deployments", "endpointslices":
		default:
			continue
		}
		topic := scaleTopic(churnTopicPrefix, r.gvr)
		from, err := endOffsets(ctx, kafkaClient(), topic)
		if err != nil {
			b.Fatal(err)
		}
		obs.Go(func() { consume(octx, topic, from, seenK) })
	}
	defer func() {
		stopObservers()
		obs.Wait()
		if pollErr != nil {
			b.Errorf("poll changes: %v", pollErr)
		}
	}()

	procs := []watchedProc{
		{name: "kube-cdc → PostgreSQL", pid: pgd.cmd.Process.Pid},
		{name: "kube-cdc → Kafka", pid: kd.cmd.Process.Pid},
		{name: "kube-apiserver", pid: sc.APIServerPID()},
		{name: "etcd", pid: sc.EtcdPID()},
		{name: "kube-controller-manager", pid: sc.ComponentPID("kube-controller-manager")},
		{name: "kube-scheduler", pid: sc.ComponentPID("kube-scheduler")},
		{name: "kwok", pid: sc.ComponentPID("kwok")},
		{name: "postgres (postmaster and backends)", pid: pg.PID(), tree: true},
		{name: "bench process (kfake broker, writers, pollers)", pid: os.Getpid()},
		{name: "raw watch floor (pods → PostgreSQL)", pid: fd.cmd.Process.Pid},
	}
	floor := len(procs) - 1

	// Phase 1: a rollout wave of every Deployment, until the cluster has settled and both
	// sinks hold a sentinel write made after it.
	kc := kafkaClient()
	c0, id0, rec0, wal0 := sampleCPU(procs), maxChangeID(b, conn), scaleRecords(kc, churnTopicPrefix), walLSN(b, conn)
	if err := sc.SetImage(ctx, scaleNS, "app:2", sc.deployments...); err != nil {
		b.Fatal(err)
	}
	if err := sc.waitWorkload(ctx, 20*time.Minute); err != nil {
		b.Fatal(err)
	}
	settled := time.Now()
	sentinels := sc.sentinels(b)
	if m := seenPG.waitAll(sentinels, 3*time.Minute) + seenK.waitAll(sentinels, 3*time.Minute); m > 0 {
		b.Fatalf("%d sentinel writes never reached the sinks", m)
	}
	caughtUp := time.Since(settled)
	c1 := sampleCPU(procs)
	rollout := churnPhase{name: "rollout wave", cpu: c1.minus(c0), changes: changesSince(b, conn, id0),
		records: scaleRecords(kc, churnTopicPrefix) - rec0}
	reportf(b, "rollout wave: %d Deployments × %d replicas to a new image; settled, then both sinks caught up %v later",
		sc.shape.deployments, sc.shape.replicas, caughtUp.Round(time.Millisecond))
	rollout.log(b, procs)
	reportWAL(b, "rollout wave", walSince(b, conn, wal0), rollout.changes)

	// Phase 2: pod status updates at a controlled rate.
	pods, err := sc.writer.CoreV1().Pods(scaleNS).List(ctx, metav1.ListOptions{Limit: churnStatusPods})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, len(pods.Items))
	for i, p := range pods.Items {
		names[i] = p.Name
	}
	var podRV int64
	if err := conn.QueryRow(ctx, `SELECT max(resource_version) FROM kube_cdc.objects WHERE resource = 'pods' AND namespace = $1`, scaleNS).Scan(&podRV); err != nil {
		b.Fatal(err)
	}
	waitFloorAt(b, floorConn, podRV, fd)
	// The floor's lag, beside kube-cdc's: each RV its table shows, polled as baseline B's
	// is in the lag benchmarks (every 2 ms, visible at its commit).
	seenFloor := newSeenSet()
	floorPoll := connect(b, floorConn.Config().ConnString())
	fctx, stopFloorPoll := context.WithCancel(ctx)
	floorPolled := make(chan error, 1)
	go func() { floorPolled <- pollInformerRows(fctx, floorPoll, podRV, seenFloor) }()
	c0, id0, rec0, wal0 = sampleCPU(procs), maxChangeID(b, conn), scaleRecords(kc, churnTopicPrefix), walLSN(b, conn)
	acks := sc.patchPodStatuses(b, names, churnStatusWriters, churnStatusRate, churnStatusFor)
	missingPG, missingK := seenPG.waitAll(acks, 2*time.Minute), seenK.waitAll(acks, 2*time.Minute)
	for _, a := range acks {
		podRV = max(podRV, a.rv)
	}
	waitFloorAt(b, floorConn, podRV, fd)
	// Every write is in the floor's table now; what the poller has not seen in a few
	// seconds more was hidden by a later write of the same pod between two polls.
	missingFloor := seenFloor.waitAll(acks, 5*time.Second)
	stopFloorPoll()
	if err := <-floorPolled; err != nil {
		b.Errorf("poll the raw watch floor's table: %v", err)
	}
	c1 = sampleCPU(procs)
	status := churnPhase{name: fmt.Sprintf("pod status at %d writes/s", churnStatusRate), cpu: c1.minus(c0),
		changes: changesSince(b, conn, id0), records: scaleRecords(kc, churnTopicPrefix) - rec0}
	if missingPG > 0 || missingK > 0 {
		b.Errorf("of %d acknowledged pod status writes, %d never reached PostgreSQL and %d never reached Kafka", len(acks), missingPG, missingK)
	}
	lagPG, lagK, lagFloor := summarize(seenPG.lags(acks)), summarize(seenK.lags(acks)), summarize(seenFloor.lags(acks))
	wps := float64(len(acks)) / churnStatusFor.Seconds()
	status.log(b, procs)
	reportWAL(b, "pod status phase", walSince(b, conn, wal0), status.changes)
	for _, x := range []struct {
		sink string
		s    lagStats
	}{{"PostgreSQL (changes row)", lagPG}, {"Kafka (record fetched)", lagK}} {
		reportf(b, "lag ack→%s over %d pod status writes at %.0f writes/s: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (target p99 <= 50 ms: %s)",
			x.sink, x.s.n, wps, ms(x.s.p50), ms(x.s.p90), ms(x.s.p99), ms(x.s.max), verdict(x.s.p99 <= 50*time.Millisecond))
	}
	reportf(b, "lag ack→raw watch floor row (one upsert per event, pods only) over %d of %d writes (%d hidden by a later write between polls): p50 %.1f ms, p99 %.1f ms, max %.1f ms; kube-cdc/floor p50 PostgreSQL %.2f, Kafka %.2f; p99 PostgreSQL %.2f, Kafka %.2f",
		lagFloor.n, len(acks), missingFloor, ms(lagFloor.p50), ms(lagFloor.p99), ms(lagFloor.max),
		ms(lagPG.p50)/ms(lagFloor.p50), ms(lagK.p50)/ms(lagFloor.p50), ms(lagPG.p99)/ms(lagFloor.p99), ms(lagK.p99)/ms(lagFloor.p99))
	if src, snk := seenPG.split(acks); len(src) > 0 {
		s, k := summarize(src), summarize(snk)
		reportf(b, "  PostgreSQL split by kube-cdc's observed_at: ack→observed (watch delivery) p50 %.1f ms p99 %.1f ms; observed→visible (batch, write, commit) p50 %.1f ms p99 %.1f ms",
			ms(s.p50), ms(s.p99), ms(k.p50), ms(k.p99))
	}
	pgPer1k, kPer1k := status.per1k(0), status.per1k(1)
	reportf(b, "kube-cdc CPU per 1,000 changes at %.0f writes/s (%d changes in the window, background included): PostgreSQL %.3f s (target <= 0.15: %s), Kafka %.3f s (target <= 0.15: %s)",
		wps, status.changes, pgPer1k, verdict(pgPer1k <= 0.15), kPer1k, verdict(kPer1k <= 0.15))
	var podChanges int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE id > $1 AND resource = 'pods' AND namespace = $2`, id0, scaleNS).Scan(&podChanges); err != nil {
		b.Fatal(err)
	}
	floorPer1k := status.cpu.proc[floor] / max(float64(podChanges)/1000, 1e-9)
	reportf(b, "raw watch floor (pods only, one upsert per event): %.3f s per 1,000 pod changes (%d) (target <= 0.15: %s); kube-cdc/floor PostgreSQL %.2f, Kafka %.2f",
		floorPer1k, podChanges, verdict(floorPer1k <= 0.15), pgPer1k/floorPer1k, kPer1k/floorPer1k)

	b.ReportMetric(float64(rollout.changes), "rollout_changes")
	b.ReportMetric(rollout.per1k(0), "rollout_pg_cpu_s/1k")
	b.ReportMetric(rollout.per1k(1), "rollout_kafka_cpu_s/1k")
	b.ReportMetric(rollout.share(0)+rollout.share(1), "rollout_kubecdc_%machine")
	b.ReportMetric(caughtUp.Seconds(), "rollout_catchup_s")
	b.ReportMetric(wps, "status_writes/s")
	b.ReportMetric(ms(lagPG.p50), "pg_p50_ms")
	b.ReportMetric(ms(lagPG.p99), "pg_p99_ms")
	b.ReportMetric(ms(lagK.p50), "kafka_p50_ms")
	b.ReportMetric(ms(lagK.p99), "kafka_p99_ms")
	b.ReportMetric(ms(lagFloor.p50), "floor_p50_ms")
	b.ReportMetric(ms(lagFloor.p99), "floor_p99_ms")
	b.ReportMetric(pgPer1k, "pg_cpu_s/1k")
	b.ReportMetric(kPer1k, "kafka_cpu_s/1k")
	b.ReportMetric(floorPer1k, "floor_cpu_s/1k")
	b.ReportMetric(pgPer1k/floorPer1k, "cpu_pg/floor")
	b.ReportMetric(status.share(0)+status.share(1), "status_kubecdc_%machine")
	b.ReportMetric(0, "ns/op")

	stopObservers()
	pgd.stop(b)
	kd.stop(b)
	fd.stop(b)
}

// pollChangesWithGaps records, every 2 ms on one connection, when each RV appeared in
// kube_cdc.changes (ids above fromID; its commit time), until ctx ends. Several
// transactions may write at once (a stream per resource): an id may commit after a higher
// one was read, so the ids skipped over are asked for again on every poll until they
// appear or 10 s have passed (a replayed insert that conflicted takes an id that never
// appears).
func pollChangesWithGaps(ctx context.Context, conn *pgx.Conn, fromID int64, seen *seenSet) error {
	last := fromID
	gaps := map[int64]time.Time{}
	for ctx.Err() == nil {
		ids := make([]int64, 0, len(gaps))
		for id, since := range gaps {
			if time.Since(since) > 10*time.Second {
				delete(gaps, id)
				continue
			}
			ids = append(ids, id)
		}
		rows, err := conn.Query(ctx, `SELECT id, resource_version, observed_at, `+visibleAt+` FROM kube_cdc.changes
			WHERE id > $1 OR id = ANY($2) ORDER BY id`, last, ids)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Now()
		var id, rv int64
		var observed, at time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &rv, &observed, &at}, func() error {
			seen.see(rv, at, observed)
			delete(gaps, id)
			if id > last {
				for g := last + 1; g < id; g++ {
					gaps[g] = now
				}
				last = id
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

func maxChangeID(b *testing.B, conn *pgx.Conn) int64 {
	b.Helper()
	var id int64
	if err := conn.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&id); err != nil {
		b.Fatal(err)
	}
	return id
}

// changesSince counts the changes rows above id (the sequence has gaps: a replayed insert
// that conflicts still takes a number).
func changesSince(b *testing.B, conn *pgx.Conn, id int64) int64 {
	b.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kube_cdc.changes WHERE id > $1`, id).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// sentinels annotates one Pod, ReplicaSet, Deployment and EndpointSlice of the workload
// and returns the RVs the apiserver acknowledged: once a sink holds them, it holds every
// earlier change of those resources (per resource, changes come in watch order).
func (sc *scaleCluster) sentinels(b *testing.B) []ack {
	b.Helper()
	ctx := context.Background()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench.kube-cdc.io/sentinel":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	var acks []ack
	add := func(rv string, err error) {
		b.Helper()
		if err != nil {
			b.Fatalf("sentinel: %v", err)
		}
		n, _ := strconv.ParseInt(rv, 10, 64)
		acks = append(acks, ack{rv: n, at: time.Now()})
	}
	cs := sc.writer
	opts := metav1.ListOptions{Limit: 1}
	pods, err := cs.CoreV1().Pods(scaleNS).List(ctx, opts)
	if err != nil || len(pods.Items) == 0 {
		b.Fatalf("list pods: %v", err)
	}
	p, err := cs.CoreV1().Pods(scaleNS).Patch(ctx, pods.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{})
	add(rvOf(p, err))
	rss, err := cs.AppsV1().ReplicaSets(scaleNS).List(ctx, opts)
	if err != nil || len(rss.Items) == 0 {
		b.Fatalf("list replicasets: %v", err)
	}
	rs, err := cs.AppsV1().ReplicaSets(scaleNS).Patch(ctx, rss.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{})
	add(rvOf(rs, err))
	d, err := cs.AppsV1().Deployments(scaleNS).Patch(ctx, sc.deployments[0], types.MergePatchType, patch, metav1.PatchOptions{})
	add(rvOf(d, err))
	eps, err := cs.DiscoveryV1().EndpointSlices(scaleNS).List(ctx, opts)
	if err != nil || len(eps.Items) == 0 {
		b.Fatalf("list endpointslices: %v", err)
	}
	ep, err := cs.DiscoveryV1().EndpointSlices(scaleNS).Patch(ctx, eps.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{})
	add(rvOf(ep, err))
	return acks
}

func rvOf(o metav1.Object, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return o.GetResourceVersion(), nil
}

// patchPodStatuses sets a condition of its own on the status of the named pods, cycling
// through them for dur with `workers` writers that each own a disjoint subset, paced
// together to rate writes/s, as a kubelet's status updates are. It returns every
// acknowledged write.
func (sc *scaleCluster) patchPodStatuses(b *testing.B, names []string, workers int, rate float64, dur time.Duration) []ack {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	tokens := make(chan struct{}, 10000)
	go func() {
		start := time.Now()
		sent := 0
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case now := <-t.C:
				// Catch up to rate × elapsed, so the average rate is exact.
				for due := int(now.Sub(start).Seconds() * rate); sent < due; sent++ {
					tokens <- struct{}{}
				}
			}
		}
	}()
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	var errOnce sync.Once
	var werr error
	for w := range workers {
		var mine []string
		for i := w; i < len(names); i += workers {
			mine = append(mine, names[i])
		}
		wg.Go(func() {
			var local []ack
			defer func() {
				mu.Lock()
				acks = append(acks, local...)
				mu.Unlock()
			}()
			for i := 0; ; i++ {
				if _, ok := <-tokens; !ok {
					return
				}
				patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"bench.kube-cdc.io/Probe","status":"True","reason":"Probe","message":"seq %d"}]}}`, i)
				// Not the phase's ctx: a write in flight when it ends still counts.
				got, err := sc.writer.CoreV1().Pods(scaleNS).Patch(context.Background(), mine[i%len(mine)],
					types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				at := time.Now()
				if err != nil {
					errOnce.Do(func() { werr = err })
					return
				}
				rv, _ := strconv.ParseInt(got.ResourceVersion, 10, 64)
				local = append(local, ack{rv: rv, at: at})
			}
		})
	}
	wg.Wait()
	if werr != nil {
		b.Fatalf("patch pod status: %v", werr)
	}
	return acks
}

// ---- CPU per process over a window ----

// watchedProc is a process whose CPU a phase reports; tree adds its children (PostgreSQL's
// backends), living and reaped.
type watchedProc struct {
	name string
	pid  int
	tree bool
}

// cpuSample is every watched process's CPU seconds and the machine's, at one time.
type cpuSample struct {
	at             time.Time
	proc           []float64
	busy, capacity float64 // the machine: CPU seconds busy, and elapsed × CPUs
}

// cpuDelta is what a window used.
type cpuDelta struct {
	wall           time.Duration
	proc           []float64
	busy, capacity float64
}

func sampleCPU(procs []watchedProc) cpuSample {
	s := cpuSample{at: time.Now(), proc: make([]float64, len(procs))}
	children := map[int][]int{}
	if anyTree(procs) {
		children = childrenOf()
	}
	for i, p := range procs {
		if p.tree {
			s.proc[i] = treeCPU(p.pid, children)
		} else {
			s.proc[i] = cpuNow(p.pid)
		}
	}
	s.busy, s.capacity = machineCPU()
	return s
}

func anyTree(procs []watchedProc) bool {
	for _, p := range procs {
		if p.tree {
			return true
		}
	}
	return false
}

func (s cpuSample) minus(o cpuSample) cpuDelta {
	d := cpuDelta{wall: s.at.Sub(o.at), proc: make([]float64, len(s.proc)), busy: s.busy - o.busy, capacity: s.capacity - o.capacity}
	for i := range s.proc {
		d.proc[i] = s.proc[i] - o.proc[i]
	}
	return d
}

// procStat reads a process's ppid and CPU seconds: its own (user+sys) and its reaped
// children's.
func procStat(pid int) (ppid int, self, children float64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v / 100 } // USER_HZ
	ppid, _ = strconv.Atoi(f[1])
	return ppid, num(11) + num(12), num(13) + num(14), true
}

func childrenOf() map[int][]int {
	out := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, _, ok := procStat(pid); ok {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out
}

func treeCPU(pid int, children map[int][]int) float64 {
	_, self, reaped, ok := procStat(pid)
	if !ok {
		return 0
	}
	t := self + reaped
	for _, c := range children[pid] {
		t += treeCPU(c, children)
	}
	return t
}

// machineCPU reads /proc/stat: CPU seconds busy (all but idle and iowait) and in all,
// summed over CPUs.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += x / 100
		if i != 3 && i != 4 { // idle, iowait
			busy += x / 100
		}
	}
	return busy, total
}

// churnPhase is one phase's figures; proc 0 and 1 are the two kube-cdc processes.
type churnPhase struct {
	name             string
	cpu              cpuDelta
	changes, records int64
}

func (p churnPhase) per1k(i int) float64 {
	if p.changes == 0 {
		return 0
	}
	return p.cpu.proc[i] / (float64(p.changes) / 1000)
}

// share is process i's CPU as a percentage of the machine's capacity over the window.
func (p churnPhase) share(i int) float64 {
	if p.cpu.capacity == 0 {
		return 0
	}
	return 100 * p.cpu.proc[i] / p.cpu.capacity
}

func (p churnPhase) log(b *testing.B, procs []watchedProc) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %v, %d changes rows (%.0f/s), %d Kafka records; machine (%d CPUs) %.0f%% busy. CPU over the window:",
		p.name, p.cpu.wall.Round(time.Millisecond), p.changes, float64(p.changes)/p.cpu.wall.Seconds(), p.records,
		runtime.NumCPU(), 100*p.cpu.busy/max(p.cpu.capacity, 1e-9))
	named := 0.0
	for i, pr := range procs {
		named += p.cpu.proc[i]
		fmt.Fprintf(&sb, "\n  %-48s %7.2f s  %5.1f%% of the machine  %5.1f%% of its busy time", pr.name, p.cpu.proc[i],
			p.share(i), 100*p.cpu.proc[i]/max(p.cpu.busy, 1e-9))
	}
	fmt.Fprintf(&sb, "\n  %-48s %7.2f s  %5.1f%% of the machine", "everything else on the machine", p.cpu.busy-named,
		100*(p.cpu.busy-named)/max(p.cpu.capacity, 1e-9))
	fmt.Fprintf(&sb, "\n  kube-cdc CPU per 1,000 changes: PostgreSQL %.3f s, Kafka %.3f s", p.per1k(0), p.per1k(1))
	reportf(b, "%s", sb.String())
}

// reportWAL states the PostgreSQL write volume of a churn phase: WAL bytes in all (the
// server's, every database's: the Kafka daemon writes none) and per changes row.
func reportWAL(b *testing.B, phase string, wal, changes int64) {
	if changes == 0 {
		return
	}
	reportf(b, "  %s: PostgreSQL WAL %.1f MB for %d changes rows = %.0f bytes per change (sizing)", phase, float64(wal)/1e6, changes, float64(wal)/float64(changes))
}
