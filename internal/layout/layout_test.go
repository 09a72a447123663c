package layout

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kube-cdc/kube-cdc/"

// deps maps every package of the module to its transitive non-test dependencies.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = "../.." // the module root; go test runs in the package directory
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return m
}

type rule struct {
	pkgs   func(pkg string) bool // the packages the rule is about
	banned func(dep string) bool // a dependency they must not have
	why    string
	// everywhere marks a rule about (nearly) every package, which says nothing of any one
	// package's place: TestEveryPackageHasARule looks past it.
	everywhere bool
}

func under(prefix string) func(string) bool {
	return func(p string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
}

func anyOf(fs ...func(string) bool) func(string) bool {
	return func(p string) bool {
		for _, f := range fs {
			if f(p) {
				return true
			}
		}
		return false
	}
}

func not(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }

func own(name string) func(string) bool { return under(module + name) }

var (
	clientGo = under("k8s.io/client-go")
	kafkaGo  = under("github.com/segmentio/kafka-go")
	sinks    = []string{"internal/sinks/postgres", "internal/sinks/kafka", "internal/sinks/stdout"}
)

func rules() []rule {
	rs := []rule{
		{
			// internal/signal, like internal/leader, talks to the cluster about kube-cdc itself
			// (resnapshot requests in a ConfigMap), not about the resources it streams.
			// internal/deploytest's tests apply the chart's RBAC to a real apiserver.
			// internal/upgradetest/rolling's test writes ConfigMaps beside the binaries it runs.
			pkgs:       not(anyOf(under("internal/source"), under("internal/leader"), under("internal/signal"), under("internal/testenv"), under("internal/deploytest"), under("internal/upgradetest/rolling"), under("cmd"), under("hack"), under("bench"))),
			banned:     clientGo,
			why:        "only internal/source (and leader, signal, testenv, deploytest, upgradetest/rolling, cmd, hack, bench) may depend on client-go",
			everywhere: true,
		},
		{
			// The rolling upgrade drives two built binaries, as an operator would: it reaches
			// their behaviour through their logs, metrics and the database only.
			pkgs:   under("internal/upgradetest/rolling"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) && !own("internal/testenv")(d) },
			why:    "internal/upgradetest/rolling imports nothing of the project but testenv (it runs the binaries)",
		},
		{
			pkgs:   under("internal/change"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "internal/change depends on nothing in the project",
		},
		{
			pkgs: under("internal/pipeline"),
			banned: func(d string) bool {
				return strings.HasPrefix(d, module) && !own("internal/change")(d) && !own("internal/retry")(d) && !own("internal/keyindex")(d)
			},
			why: "internal/pipeline imports only change, keyindex and retry",
		},
		{
			pkgs:   under("internal/keyindex"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) && !own("internal/change")(d) },
			why:    "internal/keyindex depends only on change",
		},
		{
			pkgs:   anyOf(under("internal/checkpoint"), under("internal/sinks/stdout"), under("internal/sinks/postgres")),
			banned: kafkaGo,
			why:    "Kafka lives in internal/sinks/kafka only",
		},
		{
			pkgs:   anyOf(under("internal/sinks"), under("internal/checkpoint"), under("internal/envelope")),
			banned: anyOf(own("internal/pipeline"), own("internal/source")),
			why:    "sinks, checkpoint stores and the envelope know nothing of the pipeline or the source",
		},
		{
			// A driver bypass is protocol code with its own tests: it knows nothing of
			// changes, checkpoints or the sink that uses it.
			pkgs:   anyOf(under("internal/sinks/kafka/produce"), under("internal/sinks/postgres/roundtrip")),
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "the sinks' driver bypasses (kafka/produce, postgres/roundtrip) import nothing of the project",
		},
		{
			// The audit inputs' decoder and receiver read the apiserver's events and hand
			// them to a Store; what stores them, and how, is the caller's.
			pkgs:   func(p string) bool { return p == "internal/audit" },
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "internal/audit (the decoder, receiver and log reader) imports nothing of the project",
		},
		{
			// The delivery rules reach the audit store (PostgreSQL) through the interfaces
			// they declare; only the actors topic's record type comes from a sink.
			pkgs:   under("internal/audit/deliver"),
			banned: anyOf(own("internal/pipeline"), own("internal/source"), own("internal/sinks/postgres"), own("internal/sinks/stdout")),
			why:    "internal/audit/deliver knows nothing of the pipeline, the source or the PostgreSQL and stdout sinks",
		},
		{
			// The audit store and the text helper sit below the PostgreSQL sink, which opens
			// the store (after migrating) and shares pgtext with it.
			pkgs:   anyOf(under("internal/sinks/postgres/auditstore"), under("internal/sinks/postgres/pgtext")),
			banned: anyOf(func(d string) bool { return d == module+"internal/sinks/postgres" }, own("internal/pipeline"), own("internal/source")),
			why:    "the audit store and pgtext import neither the PostgreSQL sink nor the pipeline or the source",
		},
		{
			pkgs:   under("internal/sinks/postgres/pgtext"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "internal/sinks/postgres/pgtext imports nothing of the project",
		},
		{
			// The moment a person types (now, RFC 3339, 15m back), read alike by the CLI
			// and the UI without either importing the other's layers.
			pkgs:   under("internal/moment"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "internal/moment imports nothing of the project",
		},
		{
			// The schema's owner (migrations, partitions, retention, statistics) knows
			// nothing of changes or of the sink that writes rows into it.
			pkgs: under("internal/sinks/postgres/schema"),
			banned: func(d string) bool {
				return strings.HasPrefix(d, module) && !own("internal/pgdb")(d) && !own("internal/retry")(d) &&
					!own("internal/version")(d) && !own("migrations")(d)
			},
			why: "internal/sinks/postgres/schema imports only pgdb, retry, version and migrations",
		},
		{
			// The writer lock knows sessions and advisory locks, not changes or tables.
			pkgs: under("internal/sinks/postgres/writerlock"),
			banned: func(d string) bool {
				return strings.HasPrefix(d, module) && !own("internal/pgdb")(d) && !own("internal/retry")(d)
			},
			why: "internal/sinks/postgres/writerlock imports only pgdb and retry",
		},
		{
			pkgs:   under("internal/health"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) },
			why:    "internal/health is pure: computed from an object's JSON, it imports nothing of the project",
		},
		{
			pkgs:   under("internal/config"),
			banned: own("internal/source"),
			why:    "config reads the client-go-free packages' defaults, never the source's",
		},
		{
			// The test harness may be imported by any package's tests (see testRules), so
			// it must bring no layer of the project with it.
			pkgs:   under("internal/testenv"),
			banned: func(d string) bool { return strings.HasPrefix(d, module) && !own("internal/sinks/kafka/kafkascan")(d) },
			why:    "internal/testenv imports nothing of the project but kafkascan (itself free of the project)",
		},
	}
	for _, s := range sinks {
		var others []func(string) bool
		for _, o := range sinks {
			if o != s {
				others = append(others, own(o))
			}
		}
		rs = append(rs, rule{pkgs: under(s), banned: anyOf(others...), why: s + " imports no other sink"})
	}
	return append(rs, placeRules()...)
}

// testImports maps every package of the module to what its test files import, in-package
// (TestImports) and external (XTestImports) alike.
func testImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return m
}

// mayImportEverything are the packages whose tests wire the layers together: the
// end-to-end tests (the built binary), the benchmarks, the test harness and the in-process
// integration tests (source, pipeline and sinks wired as cmd/kube-cdc wires them). Every
// other package's tests test their own package, and follow the rules its code follows.
var mayImportEverything = anyOf(under("e2e"), under("bench"), under("internal/testenv"), under("internal/integration"))

// harness is internal/testenv, which any package's tests may import to start the real
// servers they run against. Its own dependencies (client-go, pgx, a Kafka client) are what
// it starts servers with and are not followed; the rule above keeps the project's layers
// out of it.
var harness = own("internal/testenv")

func TestImportsFollowTheDataFlow(t *testing.T) {
	all := deps(t)
	if len(all) < 10 {
		t.Fatalf("go list found only %d packages", len(all))
	}
	for _, r := range rules() {
		for pkg, ds := range all {
			if !r.pkgs(pkg) {
				continue
			}
			for _, d := range ds {
				if r.banned(d) {
					t.Errorf("%s depends on %s: %s", pkg, d, r.why)
					break
				}
			}
		}
	}
}

// The same rules hold for test files: what a package's tests import, and everything that
// depends on, is checked as if the package imported it. A test that needs a higher layer
// (a sink's test fed by the pipeline and the source, the pipeline's test writing into a
// real sink) belongs in internal/integration or e2e/.
func TestTestImportsFollowTheDataFlowOutsideTheIntegrationPackages(t *testing.T) {
	all := deps(t)
	tests := testImports(t)
	if len(tests) < 10 {
		t.Fatalf("go list found only %d packages", len(tests))
	}
	for _, r := range rules() {
		for pkg, imports := range tests {
			if !r.pkgs(pkg) || mayImportEverything(pkg) {
				continue
			}
		imports:
			for _, imp := range imports {
				own := strings.TrimPrefix(imp, module)
				if own == pkg || harness(imp) {
					continue
				}
				for _, d := range append([]string{imp}, all[own]...) {
					if r.banned(d) {
						via := ""
						if d != imp {
							via = " (which depends on " + d + ")"
						}
						t.Errorf("%s's tests import %s%s: %s", pkg, imp, via, r.why)
						break imports
					}
				}
			}
		}
	}
}
