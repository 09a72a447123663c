package deploytest

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kube-cdc/kube-cdc/internal/config"
)

const chartDir = "../../deploy/helm/kube-cdc"

// rendered is one chart rendering: every object by "Kind/name" ("Kind/namespace/name" when
// the template sets a namespace, as the Roles in watched namespaces do), and NOTES.txt.
type rendered struct {
	objects map[string]*unstructured.Unstructured
	notes   string
}

func render(t *testing.T, valuesFile string) rendered {
	t.Helper()
	vals := map[string]any{}
	if valuesFile != "" {
		var err error
		if vals, err = chartutil.ReadValuesFile(valuesFile); err != nil {
			t.Fatal(err)
		}
	}
	r, err := renderValues(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// renderValues renders the chart as `helm install cdc -n observability` would with these
// values; a template's `fail` is the error. Nothing is looked up in a cluster, as under
// `helm template`.
func renderValues(t *testing.T, vals map[string]any) (rendered, error) {
	t.Helper()
	return renderOn(t, vals, nil, false)
}

// renderOn renders the chart as `helm install` (or, with upgrade, `helm upgrade`) of
// release cdc into namespace observability with these values; with cluster, the
// templates' lookup reads that apiserver, as helm does.
func renderOn(t *testing.T, vals map[string]any, cluster *rest.Config, upgrade bool) (rendered, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := chrt.Validate(); err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name: "cdc", Namespace: "observability", IsInstall: !upgrade, IsUpgrade: upgrade,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClient(chrt, rv, cluster)
	} else {
		files, err = engine.Render(chrt, rv)
	}
	if err != nil {
		return rendered{}, err
	}
	out := rendered{objects: map[string]*unstructured.Unstructured{}}
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = text
			continue
		}
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if m == nil { // only comments
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			key := u.GetKind() + "/" + u.GetName()
			if ns := u.GetNamespace(); ns != "" {
				key = u.GetKind() + "/" + ns + "/" + u.GetName()
			}
			if _, dup := out.objects[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			out.objects[key] = u
		}
	}
	return out, nil
}

func (r rendered) has(kind, name string) bool { _, ok := r.objects[kind+"/"+name]; return ok }

// into converts the rendered object kind/name into a typed object, failing on unknown
// fields so a typo in a template shows up here.
func into[T any](t *testing.T, r rendered, kind, name string) *T {
	t.Helper()
	u, ok := r.objects[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s/%s among %v", kind, name, keys(r.objects))
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s/%s: %v", kind, name, err)
	}
	return &v
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ruleSet is a role's rules as "group/resource verbs" strings, one per group and resource.
func ruleSet(t *testing.T, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out = append(out, g+"/"+res+" "+strings.Join(r.Verbs, ","))
			}
		}
	}
	sort.Strings(out)
	return out
}

// loadRenderedConfig writes the ConfigMap's config.yaml to a file and loads it with the
// environment the Deployment would give it (secret values made up).
func loadRenderedConfig(t *testing.T, r rendered, environ []string) *config.Config {
	t.Helper()
	cm := into[corev1.ConfigMap](t, r, "ConfigMap", "cdc-kube-cdc")
	text, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap has no config.yaml: %v", cm.Data)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(config.LoadOptions{File: p, Environ: environ})
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return c
}

func checkDeployment(t *testing.T, d *appsv1.Deployment, port int32) *corev1.Container {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := &spec.Containers[0]
	if got := c.Args; !reflect.DeepEqual(got, []string{"run", "-c", "/etc/kube-cdc/config.yaml"}) {
		t.Errorf("args %v", got)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != port {
		t.Errorf("ports %+v", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe for %s: %+v", name, p)
		}
	}
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v", sc)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["config"] != "/etc/kube-cdc" || mounts["state"] != "/var/lib/kube-cdc" {
		t.Errorf("mounts %v", mounts)
	}
	if spec.ServiceAccountName != "cdc-kube-cdc" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no config checksum annotation: a config change would not roll the pods")
	}
	return c
}

func TestChartDefaults(t *testing.T) {
	r := render(t, "")

	for _, want := range []string{"ConfigMap/cdc-kube-cdc", "ServiceAccount/cdc-kube-cdc", "ClusterRole/cdc-kube-cdc",
		"ClusterRoleBinding/cdc-kube-cdc", "Service/cdc-kube-cdc", "Deployment/cdc-kube-cdc",
		"Role/observability/cdc-kube-cdc-signals", "RoleBinding/observability/cdc-kube-cdc-signals"} {
		if _, ok := r.objects[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	if len(r.objects) != 8 {
		t.Errorf("rendered %v", keys(r.objects))
	}

	cr := into[rbacv1.ClusterRole](t, r, "ClusterRole", "cdc-kube-cdc")
	want := []string{"/configmaps list,watch", "/namespaces list,watch", "apps/deployments list,watch"}
	if got := ruleSet(t, cr.Rules); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole rules\n got %v\nwant %v", got, want)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "cdc-kube-cdc")
	if crb.RoleRef.Name != "cdc-kube-cdc" || len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != "observability" {
		t.Errorf("binding %+v", crb)
	}
	if r.has("Role", "observability/cdc-kube-cdc-leader-election") || r.has("RoleBinding", "observability/cdc-kube-cdc-leader-election") {
		t.Error("lease Role rendered without leader election")
	}

	d := into[appsv1.Deployment](t, r, "Deployment", "cdc-kube-cdc")
	c := checkDeployment(t, d, 9464)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %q: without leader election a rollout must not overlap two pods", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if c.Image != "kube-cdc:0.1.0" || len(c.EnvFrom) != 0 {
		t.Errorf("image %q envFrom %+v", c.Image, c.EnvFrom)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no resource requests: %+v", c.Resources)
	}

	svc := into[corev1.Service](t, r, "Service", "cdc-kube-cdc")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9464 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}

	cfg := loadRenderedConfig(t, r, []string{})
	if cfg.Metrics.Address != ":9464" || cfg.LeaderElection.Enabled || len(cfg.Sinks) != 1 || cfg.Sinks[0].Type != config.SinkStdout {
		t.Errorf("config %+v", cfg)
	}
	// resnapshot's ConfigMap is the one the signals Role names, also without leader election.
	if cfg.LeaderElection.Namespace != "observability" || cfg.LeaderElection.Name != "cdc-kube-cdc" {
		t.Errorf("leaderElection %+v: the signals ConfigMap would not be the one the chart's Role grants", cfg.LeaderElection)
	}
	sr := into[rbacv1.Role](t, r, "Role", "observability/cdc-kube-cdc-signals")
	wantRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{"cdc-kube-cdc-signals"}, Verbs: []string{"get", "list", "watch", "update"}}
	if len(sr.Rules) != 1 || !reflect.DeepEqual(sr.Rules[0], wantRule) {
		t.Errorf("signals Role rules %+v, want only %+v", sr.Rules, wantRule)
	}
	if !strings.Contains(r.notes, "3 resource(s) into 1 sink(s)") {
		t.Errorf("NOTES:\n%s", r.notes)
	}
}

func TestChartHAWithPostgresAndKafka(t *testing.T) {
	r := render(t, "testdata/helm-ha.yaml")

	cr := into[rbacv1.ClusterRole](t, r, "ClusterRole", "cdc-kube-cdc")
	want := []string{
		"/nodes list,watch", // "Nodes": resource names are lower-cased
		"apps/deployments list,watch",
		"example.com/widgets list,watch",
		"networking.k8s.io/ingresses list,watch",
	}
	if got := ruleSet(t, cr.Rules); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole rules\n got %v\nwant %v", got, want)
	}

	// configmaps, listed twice (two namespaces), gets a Role in each and no ClusterRole rule.
	for _, ns := range []string{"team-a", "team-b"} {
		role := into[rbacv1.Role](t, r, "Role", ns+"/cdc-kube-cdc")
		if got := ruleSet(t, role.Rules); !reflect.DeepEqual(got, []string{"/configmaps list,watch"}) {
			t.Errorf("Role in %s: %v", ns, got)
		}
	}

	role := into[rbacv1.Role](t, r, "Role", "observability/cdc-kube-cdc-leader-election")
	if role.Namespace != "observability" || len(role.Rules) != 1 ||
		!reflect.DeepEqual(role.Rules[0].APIGroups, []string{"coordination.k8s.io"}) ||
		!reflect.DeepEqual(role.Rules[0].Resources, []string{"leases"}) ||
		!reflect.DeepEqual(role.Rules[0].Verbs, []string{"get", "create", "update"}) {
		t.Errorf("lease Role %+v", role)
	}
	rb := into[rbacv1.RoleBinding](t, r, "RoleBinding", "observability/cdc-kube-cdc-leader-election")
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || rb.Subjects[0].Name != "cdc-kube-cdc" {
		t.Errorf("lease RoleBinding %+v", rb)
	}

	d := into[appsv1.Deployment](t, r, "Deployment", "cdc-kube-cdc")
	c := checkDeployment(t, d, 9191)
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %q", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "kube-cdc-credentials" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["KUBE_CDC_LEADERELECTION__IDENTITY"]; e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("identity env %+v", e)
	}
	if e := env["KUBE_CDC_SINKS__1__KAFKA__SASL__PASSWORD"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "kafka-user" {
		t.Errorf("extraEnv %+v", e)
	}

	sm := r.objects["ServiceMonitor/cdc-kube-cdc"]
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints %v", eps)
	}
	if !r.has("PodDisruptionBudget", "cdc-kube-cdc") {
		t.Error("no PodDisruptionBudget")
	}

	// The config as the pod sees it: the file, the Secret's keys and the pod name.
	cfg := loadRenderedConfig(t, r, []string{
		"KUBE_CDC_SINKS__0__POSTGRES__DSN=postgres://kube_cdc:s3cret@db.prod:5432/cmdb?sslmode=require",
		"KUBE_CDC_SINKS__1__KAFKA__SASL__PASSWORD=s3cret",
		"KUBE_CDC_LEADERELECTION__IDENTITY=cdc-kube-cdc-5d8f9-abcde",
	})
	le := cfg.LeaderElection
	if !le.Enabled || le.Namespace != "observability" || le.Name != "cdc-kube-cdc" || le.Identity != "cdc-kube-cdc-5d8f9-abcde" {
		t.Errorf("leaderElection %+v", le)
	}
	if cfg.Metrics.Address != ":9191" || cfg.Cluster != "prod-eu" || cfg.Pipeline.BatchSize != 2000 {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.Sinks) != 2 || cfg.Sinks[0].Postgres.DSN != "postgres://kube_cdc:s3cret@db.prod:5432/cmdb?sslmode=require" ||
		cfg.Sinks[1].Kafka.SASL.Password != "s3cret" || cfg.Sinks[1].Checkpoint.Type != "kafka" {
		t.Errorf("sinks %+v", cfg.Sinks)
	}
	if cfg.Log.Format != "json" { // the chart's default kept under the user's config
		t.Errorf("log %+v", cfg.Log)
	}
	if !strings.Contains(r.notes, "Leader election is on") {
		t.Errorf("NOTES:\n%s", r.notes)
	}
}

// Without config.resources kube-cdc streams config.DefaultResources(); the ClusterRole
// must cover exactly that set.
func TestChartRBACCoversTheDefaultResources(t *testing.T) {
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte("config:\n  resources: null\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := render(t, p)
	var want []string
	for _, res := range config.DefaultResources() {
		resource, group, _ := strings.Cut(res.Name, ".")
		want = append(want, group+"/"+resource+" list,watch")
	}
	sort.Strings(want)
	cr := into[rbacv1.ClusterRole](t, r, "ClusterRole", "cdc-kube-cdc")
	if got := ruleSet(t, cr.Rules); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole rules\n got %v\nwant %v", got, want)
	}
	cfg := loadRenderedConfig(t, r, []string{})
	if !reflect.DeepEqual(cfg.Resources, config.DefaultResources()) {
		t.Errorf("resources %v", cfg.Resources)
	}
}
