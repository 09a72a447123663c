package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-cdc/kube-cdc/internal/testenv"
)

func TestNoSecretValueOrLastAppliedAnnotationReachesTheDatabase(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	ns := namespace(t, "s")
	dsn := pg.NewDatabase(t)
	d := start(t, "run", "-c", pgConfig(t, dsn, "  - name: secrets\n    namespaces: ["+ns+"]", ""))
	waitSynced(t, dsn)
	secrets := kube.Clientset().CoreV1().Secrets(ns)
	s, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"password":"hunter2-in-annotation"}}`,
		}},
		Data:       map[string][]byte{"password": []byte("hunter2-value")},
		StringData: map[string]string{"token": "tok-plain-value"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	digest := func() string {
		var dg string
		eventually(t, 30*time.Second, func() error {
			return conn.QueryRow(ctx, `SELECT object->'data'->>'password' FROM kube_cdc.objects WHERE namespace = $1 AND name = 'db' AND resource_version = $2`, ns, s.ResourceVersion).Scan(&dg)
		})
		return dg
	}
	first := digest()
	s.Data["password"] = []byte("hunter3-value")
	if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := digest()
	if !strings.HasPrefix(first, "hmac-sha256:") || !strings.HasPrefix(second, "hmac-sha256:") || first == second {
		t.Errorf("password digests %q then %q: want two different hmac-sha256: digests", first, second)
	}
	var dump string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(object::text, ' '), '') || (SELECT coalesce(string_agg(object::text, ' '), '') FROM kube_cdc.changes)
		FROM kube_cdc.objects`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"hunter2", "hunter3", "tok-plain", "aHVudGVy", "dG9r"} { // values and their base64 prefixes
		if strings.Contains(dump, v) {
			t.Errorf("secret material %q reached the database", v)
		}
	}
	if d.stop(syscall.SIGTERM) != 0 {
		t.Error("non-zero exit after SIGTERM")
	}
}

func TestBadInputFailsBeforeStartingWithOneLineNamingTheCause(t *testing.T) {
	t.Parallel() // shares only what no test restarts; see main_test.go
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	_, restrictedKubeconfig, err := kube.RestrictedUser(ctx, "e2e-cm-only", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "not-the-password")
	wrongPassword := u.String()
	deadKubeconfig := writeConfig(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: dead, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: dead, context: {cluster: dead, user: u}}]
current-context: dead
`, port))

	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{"invalid YAML", "cluster: [unclosed\n", []string{"config:", "yaml"}},
		{"unknown resource", pgConfigYAML(dsn, "  - name: confgimaps", ""), []string{`unknown resource "confgimaps"`, "configmaps"}},
		{"forbidden resource", strings.Replace(pgConfigYAML(dsn, "  - name: secrets", ""), kube.Kubeconfig, restrictedKubeconfig, 1), []string{"secrets", "not allowed"}},
		{"unreachable apiserver", strings.Replace(pgConfigYAML(dsn, "  - name: configmaps", ""), kube.Kubeconfig, deadKubeconfig, 1), []string{fmt.Sprintf("127.0.0.1:%d", port), "connection refused"}},
		{"wrong Postgres password", pgConfigYAML(wrongPassword, "  - name: configmaps", ""), []string{"password authentication failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := start(t, "run", "-c", writeConfig(t, tt.config))
			code, stderr := d.wait(90 * time.Second)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; stderr:\n%s", stderr)
			}
			last := lastLine(stderr)
			if !strings.HasPrefix(last, "kube-cdc: ") {
				t.Errorf("last line %q does not start with kube-cdc:", last)
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q does not contain %q", last, w)
				}
			}
			if strings.Contains(stderr, "not-the-password") {
				t.Errorf("the password appears in the output:\n%s", stderr)
			}
		})
	}
}

// lastLine is the error line kube-cdc exited with ("kube-cdc: …"), else the last line of
// s: client-go's reflectors, stopping, may log a debug line after it ("Stopping reflector"
// came last once).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "kube-cdc: ") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}
