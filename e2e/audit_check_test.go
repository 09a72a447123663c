package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

// check says FAIL where run would fail (issue 9): an audit.sink that names no sink, or a
// sink that is not postgres, stops both, naming the key and the reason.
func TestCheckAndRunAgreeOnAnAuditSinkThatIsMissingOrNotPostgres(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	certs, err := testenv.NewAuditTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	for _, tc := range []struct{ sink, want string }{
		{"nope", `config: audit.sink: no postgres sink named "nope": audit events are stored in a postgres sink's database`},
		{"out", `config: audit.sink: sink "out" is a stdout sink: audit events are stored in a postgres sink's database`},
	} {
		cfg := writeConfig(t, fmt.Sprintf(`cluster: e2e
kubernetes:
  kubeconfig: %q
resources:
  - name: configmaps
sinks:
  - {name: warehouse, type: postgres, postgres: {dsn: %q}}
  - {name: out, type: stdout}
metrics:
  address: ""
%s`, kube.Kubeconfig, dsn, strings.Replace(auditConfig(t, "127.0.0.1:0", certs), "audit:\n", "audit:\n  sink: "+tc.sink+"\n", 1)))
		code, out := runCLI(t, "check", "-c", cfg)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("check with audit.sink %s: exit %d, want non-zero and %q:\n%s", tc.sink, code, tc.want, out)
		}
		checkRunFails(t, cfg, tc.want)
	}
}
