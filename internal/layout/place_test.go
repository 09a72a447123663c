package layout

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// project is any package of the module.
func project(d string) bool { return strings.HasPrefix(d, module) }

// only bans every package of the project but the allowed ones.
func only(allowed ...string) func(string) bool {
	return func(d string) bool {
		if !project(d) {
			return false
		}
		for _, a := range allowed {
			if own(a)(d) {
				return false
			}
		}
		return true
	}
}

// testOnly are the packages whose code is their tests (and a doc.go): they test the
// house, and have no place in it.
var testOnly = anyOf(under("internal/layout"), under("internal/integration"), under("internal/deploytest"), under("internal/upgradetest"))

// anySink is a package of internal/sinks.
var anySink = own("internal/sinks")

// placeRules give each package not placed by the rules above its place in the house: what
// it may build on. Every package under internal/ and migrations has one
// (TestEveryPackageHasARule); cmd, hack, e2e and bench wire and measure the layers, and
// may import them all.
func placeRules() []rule {
	return []rule{
		{
			pkgs:   anyOf(under("internal/retry"), under("internal/version"), under("internal/ignorepaths"), under("internal/leader"), under("internal/sinks/kafka/kafkascan"), under("migrations")),
			banned: project,
			why:    "retry, version, ignorepaths, leader, kafkascan and migrations import nothing of the project",
		},
		{
			pkgs:   under("internal/pgdb"),
			banned: only("internal/retry"),
			why:    "internal/pgdb, below the sink and the read store, imports only retry: it knows nothing of changes or the schema",
		},
		{
			pkgs:   anyOf(under("internal/metrics"), under("internal/resolved")),
			banned: only("internal/change"),
			why:    "metrics and resolved import only change",
		},
		{
			// The audit input's delivery rules (internal/audit/deliver) have a rule of their
			// own: they write the actors topic's record.
			pkgs:   anyOf(under("internal/source"), under("internal/signal"), func(p string) bool { return p == "internal/audit" }),
			banned: anyOf(anySink, own("internal/pipeline"), own("internal/checkpoint"), own("internal/read")),
			why:    "source, signal and the audit input know nothing of the sinks, the pipeline, checkpoints or the read side",
		},
		{
			// The read side reads the schema through the store, which builds on pgdb alone.
			pkgs:   anyOf(under("internal/read/store"), under("internal/read/history")),
			banned: only("internal/change", "internal/pgdb", "internal/retry", "internal/read/store", "internal/moment"),
			why:    "the read store and history import only change, pgdb, retry, moment and the store: no sink, no config",
		},
		{
			// kube-cdc as-of prints the kind's columns, as the web UI's as-of page does.
			pkgs:   under("internal/read/asof"),
			banned: only("internal/change", "internal/pgdb", "internal/retry", "internal/read/store", "internal/moment", "internal/read/columns", "internal/health"),
			why:    "as-of imports only change, pgdb, retry, moment, the store and the columns: no sink, no config",
		},
		{
			// The kubectl-style columns are computed from an object's JSON, like health.
			pkgs:   under("internal/read/columns"),
			banned: only("internal/health"),
			why:    "internal/read/columns is pure: computed from an object's JSON, it imports only health",
		},
		{
			pkgs:   anyOf(under("internal/read"), under("internal/status")),
			banned: own("internal/source"),
			why:    "the read side and status read what the sinks wrote, never the cluster: they do not depend on the source",
		},
		{
			// check's rows that need no cluster client: they open the sinks as run would,
			// and change nothing.
			pkgs:   under("internal/check"),
			banned: anyOf(own("internal/source"), own("internal/read"), own("internal/status")),
			why:    "internal/check knows nothing of the source, the read side or status",
		},
		{
			// hack/demo starts the demo's servers with the harness.
			pkgs:       not(anyOf(testOnly, under("hack/demo"))),
			banned:     anyOf(testOnly, own("internal/testenv")),
			why:        "no package's code but hack/demo imports the test harness, and none a test-only package (layout, integration, deploytest, upgradetest)",
			everywhere: true,
		},
	}
}

// directImports maps every package of the module to what its non-test files import.
func directImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
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

// The read side reads the schema through internal/read/store, never through a sink: no
// package under internal/read imports one. (The web UI's status page reaches the config,
// whose options types are the sinks', through internal/status: a dependency, not an
// import, which the rule above keeps out of the store, history and as-of.)
func TestNothingUnderInternalReadImportsASink(t *testing.T) {
	imports := directImports(t)
	read := 0
	for pkg, imps := range imports {
		if !under("internal/read")(pkg) {
			continue
		}
		read++
		for _, imp := range imps {
			if anySink(imp) {
				t.Errorf("%s imports %s: the read side reads through internal/read/store, not a sink", pkg, imp)
			}
		}
	}
	if read < 4 {
		t.Fatalf("go list found %d packages under internal/read, want at least 4 (store, history, asof, ui)", read)
	}
}

// Every package under internal/ and migrations has a rule of its own, beyond the rules
// about every package: a new package is placed in the house when it is made. The
// test-only packages are not in the house.
func TestEveryPackageHasARule(t *testing.T) {
	all := deps(t)
	rs := rules()
	for pkg := range all {
		if !under("internal")(pkg) && !under("migrations")(pkg) || testOnly(pkg) {
			continue
		}
		placed := false
		for _, r := range rs {
			if !r.everywhere && r.pkgs(pkg) {
				placed = true
				break
			}
		}
		if !placed {
			t.Errorf("%s has no rule in internal/layout: say what it may import", pkg)
		}
	}
}
