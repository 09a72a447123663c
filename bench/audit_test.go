package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// auditBatchWait is the apiserver's --audit-webhook-batch-max-wait in BenchmarkAuditActors.
const auditBatchWait = 500 * time.Millisecond

// BenchmarkAuditActors: an apiserver auditing ConfigMap writes at RequestResponse to
// kube-cdc's receiver (webhook backend, batch mode, a batch wait of auditBatchWait), 200
// updates/s for 20 s by a token user, followed at once by two kube-cdc processes, each
// into a database of its own: one without the audit receiver, one with it. Both see the
// very same writes on the same loaded machine. Reported: each one's CPU per 1,000 changes
// and their ratio (target: the receiver adds ≤ 25%), and, for the one with the receiver,
// the time from a write's acknowledgement to its actor being visible in change_actors
// (the later of the change's and the event's commit), p50 and p99 (target: p99 ≤ the
// batch wait + 100 ms).
func BenchmarkAuditActors(b *testing.B) {
	const (
		ns   = "bench-audit"
		objN = 200
		rate = 200.0
		dur  = 20 * time.Second
	)
	ctx := context.Background()
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := b.TempDir()
	certs, err := testenv.NewAuditTLS(dir)
	if err != nil {
		b.Fatal(err)
	}
	k := testenv.NewKube(b, testenv.KubeOptions{Audit: &testenv.AuditOptions{
		Policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: None\n  users: [admin]\n" +
			"- level: RequestResponse\n  resources: [{group: \"\", resources: [configmaps]}]\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n",
		Webhook: &testenv.AuditWebhook{URL: "https://" + addr + "/audit", CAPEM: certs.CAPEM,
			ClientCertPEM: certs.ClientCertPEM, ClientKeyPEM: certs.ClientKeyPEM, BatchMaxWait: auditBatchWait},
	}})
	userCfg, err := k.TokenUser(ctx, testenv.TokenUsers[0])
	if err != nil {
		b.Fatal(err)
	}
	userCfg = rest.CopyConfig(userCfg)
	userCfg.QPS, userCfg.Burst = -1, 0
	user, err := kubernetes.NewForConfig(userCfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	objs := make([]*corev1.ConfigMap, objN)
	for i := range objs {
		cm, err := user.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
			Data: payload1K(i)}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		objs[i] = cm
	}

	type arm struct {
		name string
		dsn  string
		d    *daemon
	}
	config := func(dsn, extra string) string {
		return strings.Replace(pgDaemonConfigLevel(dsn, ns, daemonLogLevel()), kube.Kubeconfig, k.Kubeconfig, 1) + extra
	}
	var arms []*arm
	for _, a := range []struct{ name, extra string }{
		{"without receiver", ""},
		{"with receiver", fmt.Sprintf("audit:\n  webhook: {listen: %q, tlsCertFile: %q, tlsKeyFile: %q, clientCAFile: %q}\n",
			addr, certs.CertFile, certs.KeyFile, certs.CAFile)},
	} {
		dsn := pg.NewDatabase(b)
		d := startDaemon(b, config(dsn, a.extra))
		waitSynced(b, connect(b, dsn), ns, objN, 2*time.Minute, d)
		arms = append(arms, &arm{name: a.name, dsn: dsn, d: d})
	}
	defer func() {
		for _, a := range arms {
			a.d.stop(b)
		}
	}()
	withRcv, without := connect(b, arms[1].dsn), connect(b, arms[0].dsn)
	var fromID int64
	if err := withRcv.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM kube_cdc.changes`).Scan(&fromID); err != nil {
		b.Fatal(err)
	}

	cpu0 := make([]float64, len(arms))
	for i, a := range arms {
		cpu0[i] = cpuNow(a.d.cmd.Process.Pid)
	}
	acks := paceUpdates(b, user, objs, int(rate/25), rate, dur)
	// Every write's change and actor are in (or a minute passed).
	want := int64(len(acks))
	deadline := time.Now().Add(time.Minute)
	for {
		var changes, joined int64
		if err := withRcv.QueryRow(ctx, `SELECT count(*), count(a.change_id) FROM kube_cdc.changes c
			LEFT JOIN kube_cdc.change_actors a ON a.change_id = c.id WHERE c.id > $1`, fromID).Scan(&changes, &joined); err != nil {
			b.Fatal(err)
		}
		var other int64
		if err := without.QueryRow(ctx, `SELECT count(*) FROM kube_cdc.changes WHERE observed_at > now() - interval '5 minutes' AND NOT snapshot`).Scan(&other); err != nil {
			b.Fatal(err)
		}
		if (changes >= want && joined >= want && other >= want) || time.Now().After(deadline) {
			if joined < want {
				b.Errorf("%d of %d changes joined to their actor", joined, want)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu := make([]float64, len(arms))
	for i, a := range arms {
		cpu[i] = (cpuNow(a.d.cmd.Process.Pid) - cpu0[i]) / float64(len(acks)) * 1000
	}

	// Actor visibility: the later of the change's and its event's commit, minus the ack.
	rows, err := withRcv.Query(ctx, `SELECT c.resource_version,
		greatest(pg_xact_commit_timestamp(c.xmin), pg_xact_commit_timestamp(e.xmin))
		  FROM kube_cdc.changes c JOIN kube_cdc.change_actors a ON a.change_id = c.id
		  JOIN kube_cdc.audit_events e ON e.audit_id = a.audit_id
		 WHERE c.id > $1`, fromID)
	if err != nil {
		b.Fatal(err)
	}
	visible := map[int64]time.Time{}
	for rows.Next() {
		var rv int64
		var at time.Time
		if err := rows.Scan(&rv, &at); err != nil {
			b.Fatal(err)
		}
		visible[rv] = at
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var lags []time.Duration
	for _, a := range acks {
		if t, ok := visible[a.rv]; ok {
			lags = append(lags, max(t.Sub(a.at), 0))
		}
	}
	st := summarize(lags)
	ratio := cpu[1] / cpu[0]
	b.ReportMetric(cpu[0]*1000, "cpu-ms/1k-without")
	b.ReportMetric(cpu[1]*1000, "cpu-ms/1k-with")
	b.ReportMetric(ratio, "cpu-ratio")
	b.ReportMetric(ms(st.p50), "actor-p50-ms")
	b.ReportMetric(ms(st.p99), "actor-p99-ms")
	b.Logf("%d updates at %.0f/s by a token user, audited at RequestResponse (batch wait %v):\n"+
		"  CPU per 1,000 changes: without receiver %.0f ms, with %.0f ms: ratio %.2f (target ≤ 1.25: %s)\n"+
		"  actor visible after the write's ack: p50 %.0f ms, p99 %.0f ms, max %.0f ms over %d writes (target p99 ≤ %v: %s)",
		len(acks), rate, auditBatchWait, cpu[0]*1000, cpu[1]*1000, ratio, verdict(ratio <= 1.25),
		ms(st.p50), ms(st.p99), ms(st.max), st.n, auditBatchWait+100*time.Millisecond, verdict(st.p99 <= auditBatchWait+100*time.Millisecond))
}

// paceUpdates is updateConfigMaps with another client: objs updated for dur by workers
// writers at rate writes/s in all, each writer owning its objects.
func paceUpdates(b *testing.B, cs kubernetes.Interface, objs []*corev1.ConfigMap, workers int, rate float64, dur time.Duration) []ack {
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
				for due := int(now.Sub(start).Seconds() * rate); sent < due; sent++ {
					tokens <- struct{}{}
				}
			}
		}
	}()
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	var werr error
	var once sync.Once
	for w := range workers {
		var mine []int
		for i := w; i < len(objs); i += workers {
			mine = append(mine, i)
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				if _, ok := <-tokens; !ok {
					return
				}
				j := mine[i%len(mine)]
				cm := objs[j]
				cm.Data["seq"] = strconv.Itoa(i)
				got, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
				at := time.Now()
				if err != nil {
					once.Do(func() { werr = err })
					return
				}
				rv, _ := strconv.ParseInt(got.ResourceVersion, 10, 64)
				mu.Lock()
				acks = append(acks, ack{rv: rv, at: at})
				mu.Unlock()
				objs[j] = got
			}
		})
	}
	wg.Wait()
	if werr != nil {
		b.Fatalf("update: %v", werr)
	}
	return acks
}
