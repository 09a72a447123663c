package ui_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// uiConfig writes the shared config with the sink's DSN replaced by other.
func uiConfig(t *testing.T, other string) string {
	t.Helper()
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), quoteYAML(dsn), quoteYAML(other), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// quoteYAML is how main_test.go writes a DSN into the config (%q).
func quoteYAML(s string) string { return `"` + s + `"` }

// startUI runs `kube-cdc ui -c cfg args…` and returns the base URL it prints; the process
// is stopped when the test ends.
func startUI(t *testing.T, cfg string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, append([]string{"ui", "-c", cfg}, args...)...)
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("kube-cdc ui printed %q, want its URL\n%s", line, stderr.String())
		}
		return "http://" + m[1]
	case <-time.After(60 * time.Second):
		t.Fatalf("kube-cdc ui printed no URL within 60s\n%s", stderr.String())
	}
	return ""
}

// every page of the UI over the shared world, each with what shows it was read.
func everyPage(ns string) map[string]string {
	at := url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))
	return map[string]string{
		"/?ns=" + ns:           "app-config",
		"/chart.json?ns=" + ns: "configmaps",
		"/object?resource=configmaps&ns=" + ns + "&name=app-config": "alice-tool",
		"/asof?resource=configmaps&ns=" + ns + "&at=" + at:          ">app-config</a>",
		"/status": "&#34;checkpointStore&#34;: &#34;postgres&#34;",
	}
}

func getBody(t *testing.T, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// retentionRow is the cluster's row of the retention table as a writer leaves it: any
// write to it, even one that sets the same values, gives it a new xmin.
func retentionRow(t *testing.T) string {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var xmin, keep, updated string
	if err := conn.QueryRow(testCtx(t), `SELECT xmin::text, coalesce(keep::text, 'forever'), updated_at::text
		FROM kube_cdc.retention WHERE cluster = $1`, cluster).Scan(&xmin, &keep, &updated); err != nil {
		t.Fatal(err)
	}
	return "keep " + keep + ", updated " + updated + ", xmin " + xmin
}

func TestARoleWithSelectOnlyGetsEveryPageOfKubeCDCUI(t *testing.T) {
	w := theWorld(t)
	execSQL(t, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ui_select_only') THEN
			CREATE ROLE ui_select_only LOGIN PASSWORD 'select-only';
		END IF;
	END $$;
	GRANT USAGE ON SCHEMA kube_cdc TO ui_select_only;
	GRANT SELECT ON ALL TABLES IN SCHEMA kube_cdc TO ui_select_only`)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("ui_select_only", "select-only")
	cfg := uiConfig(t, u.String())
	base := startUI(t, cfg, "--listen", "127.0.0.1:0")
	for path, want := range everyPage(w.ns) {
		code, body := getBody(t, base+path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s as a role with SELECT only: %d, want 200 showing %q\n%.2000s", path, code, want, body)
		}
	}
	// The commands that only read need no more.
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "warehouse"},
		{[]string{"history", "configmaps", "app-config", "-n", w.ns}, "alice-tool"},
		{[]string{"as-of", at, "configmaps", "-n", w.ns}, "app-config"},
	} {
		cmd := exec.Command(binary, append(c.args, "-c", cfg)...)
		cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("kube-cdc %v as a role with SELECT only: %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
}

// A writer records its cluster's retention (postgres.retention) at its start and every
// hour. A UI, or a command that only reads, whose config has no retention must not
// overwrite it with "forever": it writes nothing at all, even as a role that could.
func TestKubeCDCUIAndTheReadingCommandsLeaveAWritersRetentionAsItIs(t *testing.T) {
	w := theWorld(t)
	// As a writer with postgres.retention: 720h leaves it, before each step.
	writer := func() string {
		execSQL(t, `UPDATE kube_cdc.retention SET keep = interval '30 days', updated_at = now() - interval '1 hour' WHERE cluster = '`+cluster+`'`)
		return retentionRow(t)
	}
	t.Cleanup(func() { execSQL(t, `UPDATE kube_cdc.retention SET keep = NULL WHERE cluster = '`+cluster+`'`) })
	before := writer()
	base := startUI(t, cfgPath, "--listen", "127.0.0.1:0") // the admin's DSN: a role that could write
	for range 3 {
		for path := range everyPage(w.ns) {
			if code, body := getBody(t, base+path); code != 200 {
				t.Fatalf("%s: %d\n%.2000s", path, code, body)
			}
		}
	}
	if after := retentionRow(t); after != before {
		t.Errorf("after kube-cdc ui served every page 3 times, the retention row is %s, want %s as the writer left it", after, before)
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for _, args := range [][]string{
		{"status"},
		{"history", "configmaps", "app-config", "-n", w.ns},
		{"as-of", at, "configmaps", "-n", w.ns},
		{"check"},
	} {
		before := writer()
		cmd := exec.Command(binary, append(args, "-c", cfgPath)...)
		cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
		out, err := cmd.CombinedOutput()
		if err != nil && args[0] != "check" { // check may fail a row; its sink row is what counts
			t.Fatalf("kube-cdc %v: %v\n%s", args, err, out)
		}
		if args[0] == "check" && !regexp.MustCompile(`sink warehouse\s+ok`).Match(out) {
			t.Fatalf("kube-cdc check did not check the sink:\n%s", out)
		}
		if after := retentionRow(t); after != before {
			t.Errorf("after kube-cdc %s, the retention row is %s, want %s as the writer left it", args[0], after, before)
		}
	}
}

func TestKubeCDCUIBesideARunServingTheSameUIAddressNamesTheListenFlag(t *testing.T) {
	cmd := exec.Command(binary, "ui", "-c", cfgPath) // ui.address: the running daemon's
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("kube-cdc ui on the running daemon's ui.address %s did not fail", runUI)
	}
	for _, want := range []string{"address already in use", "ui.address", "--listen"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("kube-cdc ui on the running daemon's ui.address: %v, want an error naming %q\n%s", err, want, out)
		}
	}
}
