// Command demo is `make demo`: a throwaway control plane (etcd + kube-apiserver) and
// PostgreSQL on loopback, kube-cdc streaming into Postgres, a small sample workload, and
// what landed in objects and changes. Ctrl-C stops everything.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println("starting etcd, kube-apiserver and PostgreSQL on loopback…")
	kube, err := testenv.StartKube(ctx, testenv.KubeOptions{})
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

	dir, err := os.MkdirTemp("", "kube-cdc-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`cluster: demo
kubernetes:
  kubeconfig: %q
resources:
  - name: namespaces
  - name: configmaps
  - name: services
  - name: widgets.demo.kube-cdc.io
sinks:
  - name: warehouse
    type: postgres
    postgres:
      dsn: %q
metrics:
  address: "127.0.0.1:9090"
`, kube.Kubeconfig, dsn)), 0o600); err != nil {
		return err
	}

	cs := kube.Clientset()
	preserve := true
	if err := kube.CreateCRD(ctx, &apiextensionsv1.CustomResourceDefinition{
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
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	bin := filepath.Join(testenv.RepoRoot(), "bin", "kube-cdc")
	cmd := exec.CommandContext(ctx, bin, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (run `make build`): %w", bin, err)
	}
	defer cmd.Wait()

	fmt.Println("applying a sample workload: ConfigMaps, a Service, Widgets (a CRD)…")
	for _, name := range []string{"checkout", "cart", "search"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: "shop", Labels: map[string]string{"app": name}},
			Data: map[string]string{"replicas": "2"}}
		if cm, err = cs.CoreV1().ConfigMaps("shop").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		cm.Data["replicas"] = "3"
		if _, err = cs.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Services("shop").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}, Selector: map[string]string{"app": "checkout"}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	widgets := kube.Dynamic().Resource(schema.GroupVersionResource{Group: "demo.kube-cdc.io", Version: "v1", Resource: "widgets"}).Namespace("shop")
	for _, name := range []string{"sprocket", "gear"} {
		if _, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "demo.kube-cdc.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"color": "blue"},
		}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := cs.CoreV1().ConfigMaps("shop").Delete(ctx, "search-config", metav1.DeleteOptions{}); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	if err := show(ctx, dsn); err != nil {
		return err
	}
	fmt.Printf("\nkube-cdc keeps streaming. Try:\n  KUBECONFIG=%s kubectl -n shop create configmap hello --from-literal=a=b\n  psql %q -c 'SELECT * FROM kube_cdc.changes ORDER BY id DESC LIMIT 5'\n  curl -s 127.0.0.1:9090/metrics | grep kube_cdc_changes_total\nCtrl-C stops everything.\n", kube.Kubeconfig, dsn)
	<-ctx.Done()
	return nil
}

func show(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []struct{ title, sql string }{
		{"objects (current state)", `SELECT resource, namespace, name, resource_version, coalesce(deleted_at::text, '') AS deleted_at, changed_by FROM kube_cdc.objects WHERE namespace IN ('shop', '') ORDER BY resource, namespace, name`},
		{"changes (audit trail)", `SELECT id, resource, namespace, name, op, resource_version, snapshot, inferred FROM kube_cdc.changes WHERE namespace IN ('shop', '') ORDER BY id`},
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
	}
	return nil
}
