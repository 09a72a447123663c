package deploytest

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/kube-cdc/kube-cdc/internal/config"
)

const (
	composeFile       = "../../docker-compose.yaml"
	composeConfigFile = "../../deploy/compose/kube-cdc.yaml"
)

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("../.."),
		cli.WithEnv([]string{}), // the file must not depend on the caller's environment
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	if p.Name != "kube-cdc" {
		t.Errorf("project name %q", p.Name)
	}
	if got, want := p.ServiceNames(), []string{"k3s", "kafka", "kube-cdc", "kubeconfig", "postgres"}; !reflect.DeepEqual(sorted(got), want) {
		t.Errorf("services %v, want %v", got, want)
	}
	if got, want := sorted(keys(p.Volumes)), []string{"k3s-server", "kafka-data", "kube-cdc-state", "kubeconfig", "postgres-data"}; !reflect.DeepEqual(got, want) {
		t.Errorf("volumes %v, want %v", got, want)
	}

	images := map[string]string{
		"postgres": "postgres:15", "kafka": "apache/kafka:3.9.0",
		"k3s": "rancher/k3s:v1.31.4-k3s1", "kubeconfig": "rancher/k3s:v1.31.4-k3s1", "kube-cdc": "kube-cdc",
	}
	ports := map[string][]string{ // host → container, all on 127.0.0.1
		"postgres": {"5432:5432"}, "kafka": {"9092:29092"}, "k3s": {"6443:6443"}, "kube-cdc": {"9464:9464"},
	}
	volumes := map[string][]string{ // source:target[:ro]
		"postgres":   {"postgres-data:/var/lib/postgresql/data"},
		"kafka":      {"kafka-data:/var/lib/kafka/data"},
		"k3s":        {"k3s-server:/var/lib/rancher/k3s", "kubeconfig:/output"},
		"kubeconfig": {"kubeconfig:/output"},
		"kube-cdc": {
			filepath.Join(p.WorkingDir, "deploy/compose/kube-cdc.yaml") + ":/etc/kube-cdc/config.yaml:ro",
			"kubeconfig:/k3s:ro",
			"kube-cdc-state:/var/lib/kube-cdc",
		},
	}
	healthchecks := map[string]string{
		"postgres": "CMD pg_isready -U kube_cdc -d cmdb",
		"kafka":    "CMD-SHELL /opt/kafka/bin/kafka-broker-api-versions.sh --bootstrap-server localhost:9092",
		"k3s":      "CMD kubectl get --raw /readyz",
	}
	dependsOn := map[string]map[string]string{
		"kubeconfig": {"k3s": types.ServiceConditionHealthy},
		"kube-cdc": {
			"postgres":   types.ServiceConditionHealthy,
			"kafka":      types.ServiceConditionHealthy,
			"k3s":        types.ServiceConditionHealthy,
			"kubeconfig": types.ServiceConditionCompletedSuccessfully,
		},
	}

	for name, s := range p.Services {
		t.Run(name, func(t *testing.T) {
			if s.Image != images[name] {
				t.Errorf("image %q, want %q", s.Image, images[name])
			}
			var gotPorts []string
			for _, pc := range s.Ports {
				if pc.HostIP != "127.0.0.1" {
					t.Errorf("port %s/%d published on %q, want 127.0.0.1 only", pc.Published, pc.Target, pc.HostIP)
				}
				gotPorts = append(gotPorts, pc.Published+":"+itoa(pc.Target))
			}
			if !reflect.DeepEqual(gotPorts, ports[name]) {
				t.Errorf("ports %v, want %v", gotPorts, ports[name])
			}
			var gotVolumes []string
			for _, v := range s.Volumes {
				spec := v.Source + ":" + v.Target
				if v.ReadOnly {
					spec += ":ro"
				}
				gotVolumes = append(gotVolumes, spec)
			}
			if !reflect.DeepEqual(gotVolumes, volumes[name]) {
				t.Errorf("volumes %v, want %v", gotVolumes, volumes[name])
			}
			if want, ok := healthchecks[name]; ok {
				hc := s.HealthCheck
				if hc == nil || hc.Disable || hc.Interval == nil || hc.Retries == nil ||
					!strings.HasPrefix(strings.Join(hc.Test, " "), want) {
					t.Errorf("healthcheck %+v, want %q", hc, want)
				} else if budget := time.Duration(*hc.Interval) * time.Duration(*hc.Retries); budget < time.Minute {
					t.Errorf("healthcheck gives up after %v: too soon for a cold start", budget)
				}
			} else if s.HealthCheck != nil {
				t.Errorf("unexpected healthcheck %+v", s.HealthCheck)
			}
			gotDeps := map[string]string{}
			for dep, d := range s.DependsOn {
				gotDeps[dep] = d.Condition
			}
			if want := dependsOn[name]; !reflect.DeepEqual(gotDeps, want) && (len(gotDeps) > 0 || len(want) > 0) {
				t.Errorf("depends_on %v, want %v", gotDeps, want)
			}
		})
	}

	k3s := p.Services["k3s"]
	if !k3s.Privileged {
		t.Error("k3s must be privileged")
	}
	cmd := strings.Join(k3s.Command, " ")
	if !strings.HasPrefix(cmd, "server ") || !strings.Contains(cmd, "--tls-san k3s") {
		t.Errorf("k3s command %q: the certificate must be valid for the name k3s", cmd)
	}
	if k3s.Environment["K3S_KUBECONFIG_OUTPUT"] == nil || *k3s.Environment["K3S_KUBECONFIG_OUTPUT"] != "/output/kubeconfig.yaml" {
		t.Errorf("k3s environment %v", k3s.Environment)
	}
	// The rewritten kubeconfig is the one kube-cdc's config names, at the server name the
	// certificate covers.
	rewrite := strings.Join(p.Services["kubeconfig"].Command, " ")
	if !strings.Contains(rewrite, "https://k3s:6443") || !strings.Contains(rewrite, "/output/kubeconfig.compose.yaml") {
		t.Errorf("kubeconfig command %q", rewrite)
	}

	kafka := p.Services["kafka"]
	if roles := kafka.Environment["KAFKA_PROCESS_ROLES"]; roles == nil || *roles != "broker,controller" {
		t.Error("kafka is not a single KRaft node")
	}
	if adv := kafka.Environment["KAFKA_ADVERTISED_LISTENERS"]; adv == nil || !strings.Contains(*adv, "PLAINTEXT://kafka:9092") ||
		!strings.Contains(*adv, "127.0.0.1:9092") {
		t.Errorf("kafka advertised listeners %v", adv)
	}

	cdc := p.Services["kube-cdc"]
	if cdc.Build == nil || cdc.Build.Context != p.WorkingDir {
		t.Errorf("kube-cdc build %+v", cdc.Build)
	}
	if got := []string(cdc.Command); !reflect.DeepEqual(got, []string{"run", "-c", "/etc/kube-cdc/config.yaml"}) {
		t.Errorf("kube-cdc command %v", got)
	}
	if !cdc.ReadOnly {
		t.Error("kube-cdc's root filesystem should be read-only, as in the chart")
	}
}

// deploy/compose/kube-cdc.yaml, with the environment docker-compose.yaml gives it, is a
// valid config streaming into both sinks through the kubeconfig the compose file writes.
func TestComposeKubeCDCConfig(t *testing.T) {
	p := loadCompose(t)
	var environ []string
	for k, v := range p.Services["kube-cdc"].Environment {
		if v != nil {
			environ = append(environ, k+"="+*v)
		}
	}
	c, err := config.Load(config.LoadOptions{File: composeConfigFile, Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]config.Sink{}
	for _, s := range c.Sinks {
		types[s.Type] = s
	}
	if len(c.Sinks) != 2 || types[config.SinkPostgres].Postgres == nil || types[config.SinkKafka].Kafka == nil {
		t.Fatalf("sinks %+v", c.Sinks)
	}
	if dsn := types[config.SinkPostgres].Postgres.DSN; dsn != "postgres://kube_cdc:kube_cdc@postgres:5432/cmdb?sslmode=disable" {
		t.Errorf("postgres DSN (%d bytes): the environment override did not apply", len(dsn))
	}
	if !reflect.DeepEqual(types[config.SinkKafka].Kafka.Brokers, []string{"kafka:9092"}) {
		t.Errorf("kafka brokers %v", types[config.SinkKafka].Kafka.Brokers)
	}
	if cp := types[config.SinkKafka].Checkpoint; cp.Type != "file" || !strings.HasPrefix(cp.Path, "/var/lib/kube-cdc/") {
		t.Errorf("kafka checkpoint %+v: must be on the kube-cdc-state volume", cp)
	}
	if c.Kubernetes.Kubeconfig != "/k3s/kubeconfig.compose.yaml" {
		t.Errorf("kubeconfig %q", c.Kubernetes.Kubeconfig)
	}
	// Every interface of the container (the default, loopback, is unreachable from the
	// published port), on the default's port.
	if _, port, _ := net.SplitHostPort(config.DefaultMetricsAddress); c.Metrics.Address != ":"+port || port != "9464" {
		t.Errorf("metrics address %q: the compose file publishes 9464, the default port (%s)", c.Metrics.Address, config.DefaultMetricsAddress)
	}
	// Services the config names must exist in the compose project.
	for _, host := range []string{"postgres", "kafka"} {
		if _, ok := p.Services[host]; !ok {
			t.Errorf("config names host %q, not a compose service", host)
		}
	}
}

// No file we ship names an image registry: images are bare names.
func TestNoRegistryHostsInDeployFiles(t *testing.T) {
	files := []string{composeFile, composeConfigFile, "../../Dockerfile"}
	more, _ := filepath.Glob("../../deploy/helm/kube-cdc/*.yaml")
	files = append(files, more...)
	host := regexp.MustCompile(`(?m)(image:|FROM)\s+"?[a-z0-9-]+\.[a-z0-9.-]+(:[0-9]+)?/`)
	for _, f := range files {
		b := readFile(t, f)
		if m := host.FindString(b); m != "" {
			t.Errorf("%s names a registry host: %q", f, m)
		}
	}
}

func TestDockerfileRunsAsNonRootFromScratch(t *testing.T) {
	b := readFile(t, "../../Dockerfile")
	var froms []string
	for _, line := range strings.Split(b, "\n") {
		if f, ok := strings.CutPrefix(line, "FROM "); ok {
			froms = append(froms, f)
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:1.26 ") || froms[1] != "scratch" {
		t.Errorf("stages %v", froms)
	}
	for _, want := range []string{
		"CGO_ENABLED=0 go build -trimpath",
		"USER 65532:65532",
		`ENTRYPOINT ["/kube-cdc"]`,
		`CMD ["run", "-c", "/etc/kube-cdc/config.yaml"]`,
		"/etc/ssl/certs/ca-certificates.crt",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
