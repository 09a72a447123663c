// Command demo is `make demo`: a throwaway cluster on loopback (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and KWOK simulating three nodes) and PostgreSQL,
// kube-cdc streaming into Postgres, a small sample workload, and what landed in objects
// and changes.
//
// The order shows both halves of kube-cdc: the workload that exists before kube-cdc starts
// arrives through its first LIST (snapshot rows); once every resource has synced
// (/readyz answers 200) the demo creates, updates and deletes
// objects, which arrive through the watch as create, update and delete rows, rolls a
// Deployment out and scales it — its pods scheduled onto the nodes and turning Running,
// as the pods view and the pods' changes show. Then an incident: a person edits the
// ConfigMap of the pod checkout and the pod crash-loops (its status written as a kubelet
// would, with the kubelet's repeated BackOff event), and the demo prints what
// kube_cdc.why() says changed before it broke, the events table, `kube-cdc why`, the
// history of a ConfigMap and of the Deployment, and the web UI's page of what changed
// before the pod broke (/why). Then kube-cdc keeps streaming until Ctrl-C, which stops kube-cdc,
// PostgreSQL, the apiserver and etcd, in that order, and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func main() {
	bin := flag.String("kube-cdc", filepath.Join(testenv.RepoRoot(), "bin", "kube-cdc"), "the kube-cdc binary to run (`make build` writes the default)")
	flag.Parse()
	// Ctrl-C is for the demo alone: `make` dies of a SIGINT it receives, whatever its
	// recipe does, and would end a clean stop with "make: *** … Interrupt".
	restore := takeTerminal()
	err := run(*bin)
	restore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// syncTimeout bounds the wait for kube-cdc's initial sync and for the changes made after
// it to land; either takes a few seconds.
const syncTimeout = 2 * time.Minute

func run(bin string) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		// Ctrl-C is how the demo ends, at any point: not an error.
		if ctx.Err() != nil {
			err = nil
			fmt.Println("\nstopped.")
		}
	}()
	dir, err := os.MkdirTemp("", "kube-cdc-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The apiserver sends its audit events to kube-cdc's receiver (webhook backend, batch
	// mode), which names who made each change (docs/operations.md, "Who made a change").
	auditPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	auditAddr := fmt.Sprintf("127.0.0.1:%d", auditPort)
	certs, err := testenv.NewAuditTLS(dir)
	if err != nil {
		return err
	}
	fmt.Println("starting a cluster (etcd, kube-apiserver auditing to kube-cdc, controller-manager, scheduler, KWOK) and PostgreSQL on loopback…")
	kube, err := testenv.StartCluster(ctx, testenv.ClusterOptions{Kube: testenv.KubeOptions{Audit: &testenv.AuditOptions{
		Policy: auditPolicy,
		Webhook: &testenv.AuditWebhook{URL: "https://" + auditAddr + "/audit", CAPEM: certs.CAPEM,
			ClientCertPEM: certs.ClientCertPEM, ClientKeyPEM: certs.ClientKeyPEM, BatchMaxWait: time.Second},
	}}})
	if err != nil {
		return err
	}
	defer kube.Stop()
	pg, err := testenv.StartPostgres(ctx)
	if err != nil {
		return err
	}
	defer pg.Stop()
	dsn := pg.AdminDSN()

	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
	uiPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	// The web UI, served by kube-cdc run itself (ui.address).
	uiAddr := fmt.Sprintf("127.0.0.1:%d", uiPort)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`cluster: demo
kubernetes:
  kubeconfig: %q
resources:
  - name: namespaces
  - name: configmaps
  - name: services
  - name: widgets.demo.kube-cdc.io
  - name: nodes
  - name: pods
  - name: deployments.apps
  - name: replicasets.apps
  - name: events
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: %q
ui:
  address: %q
audit:
  webhook:
    listen: %q
    tlsCertFile: %q
    tlsKeyFile: %q
    clientCAFile: %q
`, kube.Kubeconfig, dsn, metricsAddr, uiAddr, auditAddr, certs.CertFile, certs.KeyFile, certs.CAFile)), 0o600); err != nil {
		return err
	}

	fmt.Println("applying a sample workload before kube-cdc starts: three KWOK nodes, ConfigMaps, a Service, Widgets (a CRD), Deployments web (two pods) and checkout (one)…")
	w := workload{kube: kube}
	if err := w.before(ctx); err != nil {
		return err
	}

	logPath := filepath.Join(dir, "kube-cdc.log")
	daemon, err := startKubeCDC(bin, cfg, logPath)
	if err != nil {
		return err
	}
	defer daemon.stop()

	fmt.Printf("kube-cdc started (log: %s); waiting for its initial sync (/readyz)…\n", logPath)
	if err := daemon.waitReady(ctx, "http://"+metricsAddr+"/readyz"); err != nil {
		return fmt.Errorf("%w\nkube-cdc's log:\n%s", err, testenv.Tail(logPath, 20))
	}
	fmt.Printf("synced. The web UI (timeline, objects, status) is at http://%s/\n", uiAddr)
	fmt.Println("Now creating, updating and deleting objects while kube-cdc watches…")
	if err := w.after(ctx); err != nil {
		return err
	}
	if err := waitForChanges(ctx, dsn, w.observed); err != nil {
		return fmt.Errorf("%w\nkube-cdc's log:\n%s", err, testenv.Tail(logPath, 20))
	}
	// Their actors arrive with the apiserver's next audit batch (up to a second later).
	if err := waitForCount(ctx, dsn, 2, "the actors of checkout-config's updates",
		`SELECT count(*) FROM kube_cdc.changes c JOIN kube_cdc.change_actors a ON a.change_id = c.id
		  WHERE c.namespace = 'shop' AND c.name = 'checkout-config'`); err != nil {
		return fmt.Errorf("%w\nkube-cdc's log:\n%s", err, testenv.Tail(logPath, 20))
	}
	fmt.Println("rolling the Deployment web out to web:2 and scaling it to 4 pods…")
	if err := w.rollout(ctx); err != nil {
		return err
	}
	if err := waitForPods(ctx, dsn, 4, "web:2"); err != nil {
		return fmt.Errorf("%w\nkube-cdc's log:\n%s", err, testenv.Tail(logPath, 20))
	}
	fmt.Printf("an incident: %s edits checkout-config, and the pod checkout starts crash-looping…\n", testenv.TokenUsers[2])
	if err := w.incident(ctx); err != nil {
		return err
	}
	if err := waitForCount(ctx, dsn, 1, "the ConfigMap edit before checkout broke, with its user",
		`SELECT count(*) FROM kube_cdc.why('pods', 'shop', $1) WHERE relation = 'configmap' AND op = 'update' AND username = $2`,
		w.checkoutPod, testenv.TokenUsers[2]); err != nil {
		return fmt.Errorf("%w\nkube-cdc's log:\n%s", err, testenv.Tail(logPath, 20))
	}
	if err := show(ctx, dsn); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"why", "pods", w.checkoutPod, "-n", "shop"},
		{"history", "configmaps", "checkout-config", "-n", "shop"},
		{"history", "deployments.apps", "web", "-n", "shop"},
		{"status"},
	} {
		fmt.Printf("\n== kube-cdc %s ==\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, bin, append(args, "-c", cfg)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kube-cdc %s: %w", strings.Join(args, " "), err)
		}
	}
	whyPage, err := whyURL(ctx, dsn, uiAddr, w.checkoutPod)
	if err != nil {
		return err
	}
	fmt.Printf(`
What changed before the pod %s broke, with who made each change and its diff, in the web UI:
  %s
`, w.checkoutPod, whyPage)
	fmt.Printf(`
kube-cdc keeps streaming. Browse the timeline at http://%s/ and try:
  KUBECONFIG=%s kubectl -n shop create configmap hello --from-literal=a=b
  psql %q -c 'SELECT * FROM kube_cdc.changes ORDER BY id DESC LIMIT 5'
  %s history configmaps hello -n shop -c %s
  curl -s %s/metrics | grep kube_cdc_changes_total
Ctrl-C stops everything.
`, uiAddr, kube.Kubeconfig, dsn, bin, cfg, metricsAddr)
	select {
	case <-ctx.Done():
	case <-daemon.done:
		return fmt.Errorf("kube-cdc exited: %v\n%s", daemon.err, testenv.Tail(logPath, 20))
	}
	return nil
}

// kubeCDC is the kube-cdc process the demo runs.
type kubeCDC struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startKubeCDC starts `kube-cdc run` with its output in logPath, in a process group of
// its own: a Ctrl-C reaches the demo, which stops kube-cdc with SIGTERM (a flush and a
// checkpoint) before it stops the servers kube-cdc writes to. Should the demo die, the
// kernel sends kube-cdc SIGTERM too (Pdeathsig).
func startKubeCDC(bin, cfg, logPath string) (*kubeCDC, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s (run `make build`): %w", bin, err)
	}
	k := &kubeCDC{cmd: cmd, done: make(chan struct{})}
	go func() {
		k.err = cmd.Wait()
		logf.Close()
		close(k.done)
	}()
	return k, nil
}

// stop sends SIGTERM and waits for kube-cdc to exit (it flushes and commits within
// seconds); after a minute it kills it.
func (k *kubeCDC) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(time.Minute):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// waitReady polls url until it answers 200: every resource has synced.
func (k *kubeCDC) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-cdc did not sync within %v (%s: %s)", syncTimeout, url, last)
		case <-k.done:
			return fmt.Errorf("kube-cdc exited before it synced: %v", k.err)
		case <-tick.C:
		}
	}
}

// auditPolicy audits the writes of the streamed resources with their bodies (the join
// with the changes is then exact) and nothing else; the demo's own setup (the admin) is
// not audited, so its changes show their field manager only.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [admin]
- level: RequestResponse
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - {group: "", resources: [namespaces, configmaps, services, nodes, pods]}
  - {group: apps, resources: [deployments, deployments/scale, replicasets]}
  - {group: demo.kube-cdc.io, resources: [widgets]}
- level: None
`

var widgetsGVR = schema.GroupVersionResource{Group: "demo.kube-cdc.io", Version: "v1", Resource: "widgets"}

// workload is the demo's objects in namespace shop.
type workload struct {
	kube     *testenv.Cluster
	observed int // changes made after the sync: each is one non-snapshot changes row
	// checkoutPod is the pod of the Deployment checkout that the incident breaks.
	checkoutPod string
}

// before creates what kube-cdc's first LIST finds.
func (w *workload) before(ctx context.Context) error {
	preserve := true
	if err := w.kube.CreateCRD(ctx, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.demo.kube-cdc.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "demo.kube-cdc.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}); err != nil {
		return err
	}
	cs := w.kube.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := w.kube.CreateNodes(ctx, "node", 3); err != nil {
		return err
	}
	if err := w.kube.CreateDeployments(ctx, testenv.Deployment("shop", "web", 2, "web:1")); err != nil {
		return err
	}
	// The Deployment of the incident (incident): its pod reads checkout-config and is
	// behind the Service checkout.
	checkout := testenv.Deployment("shop", "checkout", 1, "checkout:1")
	checkout.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-config"}}}}
	if err := w.kube.CreateDeployments(ctx, checkout); err != nil {
		return err
	}
	if err := w.kube.WaitSettled(ctx, "shop", syncTimeout); err != nil {
		return err
	}
	for _, name := range []string{"checkout", "cart", "search"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: "shop", Labels: map[string]string{"app": name}},
			Data: map[string]string{"replicas": "2"}}
		if _, err := cs.CoreV1().ConfigMaps("shop").Create(ctx, cm, metav1.CreateOptions{FieldManager: "shop-deployer"}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Services("shop").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}, Selector: map[string]string{"app": "checkout"}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	widgets := w.kube.Dynamic().Resource(widgetsGVR).Namespace("shop")
	for _, name := range []string{"sprocket", "gear"} {
		if _, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "demo.kube-cdc.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"color": "blue"},
		}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// after changes the workload while kube-cdc watches: a create, two updates of one
// ConfigMap (its history), an update of a Widget by another field manager, deletes.
func (w *workload) after(ctx context.Context) error {
	// Made by people the apiserver knows (static tokens), so history says who.
	as := func(user string) (corev1client.ConfigMapInterface, error) {
		cfg, err := w.kube.TokenUser(ctx, user)
		if err != nil {
			return nil, err
		}
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = "kubectl/v1.36.5 (demo)"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return cs.CoreV1().ConfigMaps("shop"), nil
	}
	cms, err := as(testenv.TokenUsers[0])
	if err != nil {
		return err
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "promo-config", Namespace: "shop"},
		Data: map[string]string{"discount": "10%"}}, metav1.CreateOptions{FieldManager: "shop-deployer"}); err != nil {
		return err
	}
	w.observed++
	for i, edit := range []struct{ key, value string }{{"replicas", "3"}, {"timeout", "30s"}} {
		cms, err := as(testenv.TokenUsers[1+i])
		if err != nil {
			return err
		}
		cm, err := cms.Get(ctx, "checkout-config", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[edit.key] = edit.value
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "shop-deployer"}); err != nil {
			return err
		}
		w.observed++
	}
	widgets := w.kube.Dynamic().Resource(widgetsGVR).Namespace("shop")
	sprocket, err := widgets.Get(ctx, "sprocket", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(sprocket.Object, "red", "spec", "color"); err != nil {
		return err
	}
	if _, err := widgets.Update(ctx, sprocket, metav1.UpdateOptions{FieldManager: "painter"}); err != nil {
		return err
	}
	w.observed++
	if err := cms.Delete(ctx, "search-config", metav1.DeleteOptions{}); err != nil { // by dev-a
		return err
	}
	w.observed++
	if err := widgets.Delete(ctx, "gear", metav1.DeleteOptions{}); err != nil {
		return err
	}
	w.observed++
	return nil
}

// rollout rolls the Deployment web out to a new image and scales it to 4, and waits until
// the cluster has settled: the controllers replaced its pods, the scheduler placed them on
// the KWOK nodes, and KWOK turned them Running.
func (w *workload) rollout(ctx context.Context) error {
	if err := w.kube.SetImage(ctx, "shop", "web:2", "web"); err != nil {
		return err
	}
	if err := w.kube.Scale(ctx, "shop", 4, "web"); err != nil {
		return err
	}
	return w.kube.WaitSettled(ctx, "shop", syncTimeout)
}

// incident is the story `kube-cdc why` (and kube_cdc.why()) tells: a person edits the
// ConfigMap the pod checkout reads, and the pod starts crash-looping. KWOK runs no
// containers, so the demo writes the pod's status as a kubelet would (the status
// subresource; no Ready condition, so that no KWOK stage turns it ready again) and the
// kubelet's BackOff event, repeated.
func (w *workload) incident(ctx context.Context) error {
	cfg, err := w.kube.TokenUser(ctx, testenv.TokenUsers[2])
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl/v1.36.5 (demo)"
	user, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := user.CoreV1().ConfigMaps("shop").Patch(ctx, "checkout-config", types.MergePatchType,
		[]byte(`{"data":{"payment-endpoint":"http://payments.invalid:8443"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		return err
	}
	cs := w.kube.Clientset()
	pods, err := cs.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{LabelSelector: "app=checkout"})
	if err != nil {
		return err
	}
	if len(pods.Items) != 1 {
		return fmt.Errorf("%d pods of the Deployment checkout, want 1", len(pods.Items))
	}
	pod := &pods.Items[0]
	w.checkoutPod = pod.Name
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"phase":"Running","conditions":[{"type":"PodScheduled","status":"True"}],
		"containerStatuses":[{"name":"main","image":"checkout:1","imageID":"","ready":false,"restartCount":3,"started":false,
		  "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s restarting failed container=main pod=%s_shop"}},
		  "lastState":{"terminated":{"exitCode":1,"reason":"Error","startedAt":%q,"finishedAt":%q}}}]}}`, pod.Name, now, now)
	if _, err := cs.CoreV1().Pods("shop").Patch(ctx, pod.Name, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		return err
	}
	first := metav1.Now()
	ev, err := cs.CoreV1().Events("shop").Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + ".backoff", Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod.Name, UID: pod.UID, APIVersion: "v1",
			FieldPath: "spec.containers{main}"},
		Reason: "BackOff", Message: "Back-off restarting failed container main in pod " + pod.Name + "_shop", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: pod.Spec.NodeName}, Count: 1, FirstTimestamp: first, LastTimestamp: first,
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	for n := 2; n <= 3; n++ {
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, n, time.Now().UTC().Format(time.RFC3339))
		if _, err := cs.CoreV1().Events("shop").Patch(ctx, ev.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// whyURL is the web UI's page of what changed before pod broke, at the moment it was
// first seen crash-looping (the UI's /why; without at it would read the 30 minutes
// before whenever it is opened).
func whyURL(ctx context.Context, dsn, uiAddr, pod string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var brokeAt time.Time
	if err := conn.QueryRow(ctx, `SELECT min(observed_at) FROM kube_cdc.changes
		WHERE resource = 'pods' AND namespace = 'shop' AND name = $1
		  AND object @> '{"status":{"containerStatuses":[{"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}'`, pod).Scan(&brokeAt); err != nil {
		return "", fmt.Errorf("when the pod %s broke: %w", pod, err)
	}
	q := url.Values{"cluster": {"demo"}, "resource": {"pods"}, "ns": {"shop"}, "name": {pod}, "at": {brokeAt.UTC().Format(time.RFC3339Nano)}}
	return "http://" + uiAddr + "/why?" + q.Encode(), nil
}

// waitForPods waits until the sink's pods view shows n Running pods of image in shop.
func waitForPods(ctx context.Context, dsn string, n int, image string) error {
	return waitForCount(ctx, dsn, n, fmt.Sprintf("%d Running pods of %s", n, image),
		`SELECT count(*) FROM kube_cdc.pods WHERE namespace = 'shop' AND phase = 'Running' AND images = ARRAY[$1]`, image)
}

// waitForChanges waits until the sink holds n watched (non-snapshot) changes of the
// ConfigMaps and Widgets of namespace shop.
func waitForChanges(ctx context.Context, dsn string, n int) error {
	return waitForCount(ctx, dsn, n, fmt.Sprintf("the %d changes made after the sync", n),
		`SELECT count(*) FROM kube_cdc.changes WHERE namespace = 'shop' AND resource IN ('configmaps', 'widgets') AND NOT snapshot`)
}

// waitForCount waits until query (a count) answers at least n.
func waitForCount(ctx context.Context, dsn string, n int, what, query string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var got int
		err := conn.QueryRow(ctx, query, args...).Scan(&got)
		if err == nil && got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the sink does not hold %s within %v: %d (%v)", what, syncTimeout, got, err)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func show(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []struct{ title, sql string }{
		{"objects (current state)", `SELECT resource, namespace, name, resource_version, coalesce(deleted_at::text, '') AS deleted_at, changed_by FROM kube_cdc.objects WHERE namespace IN ('shop', '') AND resource NOT IN ('pods', 'replicasets', 'nodes') ORDER BY resource, namespace, name`},
		{"changes (audit trail: snapshot rows from the first LIST, then what the watch saw; pods and ReplicaSets below)", `SELECT id, resource, namespace, name, op, resource_version, snapshot, inferred, changed_by FROM kube_cdc.changes WHERE (namespace = 'shop' AND resource NOT IN ('pods', 'replicasets')) OR resource = 'namespaces' AND name = 'shop' ORDER BY id`},
		{"pods (the pods view: which node, phase, images, owner)", `SELECT name, node, phase, pod_ip, images, owner_kind, owner_name FROM kube_cdc.pods WHERE namespace = 'shop' ORDER BY name`},
		{"the pods of web through time (changes: each version the watch saw, with its phase and node)", `SELECT id, name, op, resource_version, object #>> '{status,phase}' AS phase, coalesce(object #>> '{spec,nodeName}', '') AS node, object #>> '{spec,containers,0,image}' AS image FROM kube_cdc.changes WHERE resource = 'pods' AND namespace = 'shop' ORDER BY id`},
		{"what changed before checkout's pod broke (kube_cdc.why('pods', 'shop', <pod>): the last 30 minutes of the pod, its controllers, ConfigMap, node and Service, with who)",
			`SELECT relation, resource, name, op, to_char(observed_at, 'HH24:MI:SS') AS at, coalesce(username, '') AS "user", coalesce(user_agent, '') AS user_agent, changed_by, coalesce(array_to_string(changed, ' '), '') AS changed FROM kube_cdc.why('pods', 'shop', (SELECT name FROM kube_cdc.objects WHERE resource = 'pods' AND namespace = 'shop' AND labels ->> 'app' = 'checkout' AND deleted_at IS NULL LIMIT 1)) WHERE NOT (relation = 'node' AND op = 'update') ORDER BY observed_at, change_id`},
		{"events (Kubernetes Events, one row per event with its count: kube_cdc.events)", `SELECT type, reason, involved_kind, involved_name, count, reporting_component, left(message, 60) AS message FROM kube_cdc.events WHERE namespace = 'shop' AND (type = 'Warning' OR involved_name LIKE 'checkout%') ORDER BY last_at`},
		{"deployments (the deployments view)", `SELECT name, replicas, ready_replicas, updated_replicas, images FROM kube_cdc.deployments WHERE namespace = 'shop'`},
	} {
		rows, err := conn.Query(ctx, q.sql)
		if err != nil {
			return err
		}
		fmt.Printf("\n== %s ==\n", q.title)
		w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		for i, f := range rows.FieldDescriptions() {
			if i > 0 {
				fmt.Fprint(w, "\t")
			}
			fmt.Fprint(w, f.Name)
		}
		fmt.Fprintln(w)
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			for i, v := range vals {
				if i > 0 {
					fmt.Fprint(w, "\t")
				}
				fmt.Fprint(w, v)
			}
			fmt.Fprintln(w)
		}
		rows.Close()
		w.Flush()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
