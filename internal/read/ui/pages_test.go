package ui_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/read/ui"
)

// feedRow is one row of the feed as the page shows it.
type feedRow struct {
	id                                      int64
	at, op, resource, namespace, name, user string // at: the observed time as shown, which sorts as text
	client                                  string // the client of the user's user agent, shown beside the user
}

var rowRE = regexp.MustCompile(`(?s)<tr class="op-(\w+)[^"]*" data-id="(\d+)">(.*?)</tr>`)
var cellRE = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
var tagRE = regexp.MustCompile(`<[^>]+>`)
var agentRE = regexp.MustCompile(`<small class="agent" title="[^"]*">([^<]*)</small>`)

func feedRows(t *testing.T, body string) []feedRow {
	t.Helper()
	var out []feedRow
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[2], 10, 64)
		cells := cellRE.FindAllStringSubmatch(m[3], -1)
		text := func(i int) string {
			return html.UnescapeString(strings.TrimSpace(tagRE.ReplaceAllString(cells[i][1], "")))
		}
		r := feedRow{id: id, at: text(0), op: m[1], resource: text(2), namespace: text(3), name: text(4)}
		if len(cells) == 9 {
			r.user = text(7)
			if agent := agentRE.FindStringSubmatch(cells[7][1]); agent != nil {
				r.client = agent[1]
				r.user = strings.TrimSpace(strings.TrimSuffix(r.user, agent[1]))
			}
		}
		out = append(out, r)
	}
	return out
}

func names(rows []feedRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.resource+" "+r.name+" "+r.op)
	}
	return out
}

func TestTheFeedListsTheNamespacesChangesNewestFirstAndEachFilterNarrowsIt(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, nil)
	q := "/?ns=" + w.ns
	code, body := get(t, srv, q)
	if code != 200 {
		t.Fatalf("GET %s: %d\n%s", q, code, body)
	}
	all := feedRows(t, body)
	want := []string{"configmaps app-config create", "configmaps app-config update", "configmaps parent create",
		"configmaps child create", "configmaps gone create", "configmaps gone delete", "secrets db-password create", "configmaps xss create"}
	got := names(all)
	for _, wn := range want {
		if !slices.Contains(got, wn) {
			t.Errorf("the feed of %s lacks %q: %v", w.ns, wn, got)
		}
	}
	if len(all) != len(want) {
		t.Errorf("the feed of %s has %d rows, want %d: %v", w.ns, len(all), len(want), got)
	}
	if !slices.IsSortedFunc(all, func(a, b feedRow) int { return strings.Compare(b.at, a.at) }) {
		t.Errorf("the feed is not newest first: %v", all)
	}
	for _, r := range all {
		if r.namespace != w.ns {
			t.Errorf("namespace filter %s let through %+v", w.ns, r)
		}
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"&resource=secrets", []string{"secrets db-password create"}},
		{"&name=app-config", []string{"configmaps app-config update", "configmaps app-config create"}},
		{"&op=delete", []string{"configmaps gone delete"}},
		{"&op=update&resource=configmaps", []string{"configmaps app-config update"}},
		{"&flag=inferred", nil},
		{"&flag=snapshot", nil},
		{"&flag=observed&name=gone", []string{"configmaps gone delete", "configmaps gone create"}},
		{"&from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z", nil},
	} {
		code, body := get(t, srv, q+c.query)
		if code != 200 {
			t.Fatalf("GET %s: %d", q+c.query, code)
		}
		if got := names(feedRows(t, body)); !slices.Equal(got, c.want) {
			t.Errorf("%s: the feed shows %v, want %v", c.query, got, c.want)
		}
	}
	for _, bad := range []string{"&op=drop", "&flag=maybe", "&from=yesterday", "&range=forever", "&before=x", "&before=5"} {
		if code, body := get(t, srv, q+bad); code != 400 || !strings.Contains(body, `id="error"`) {
			t.Errorf("GET %s: %d, want 400 with the reason", q+bad, code)
		}
	}
}

func TestTheFeedPagesByKeysetWithoutGapsOrRepeats(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, func(o *ui.Options) { o.PageSize = 3 })
	full := newServer(t, nil)
	_, body := get(t, full, "/?ns="+w.ns)
	want := feedRows(t, body)
	var got []feedRow
	next := "/?ns=" + w.ns
	nextRE := regexp.MustCompile(`href="([^"]*)" id="older"`)
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 3")
		}
		_, body := get(t, srv, next)
		rows := feedRows(t, body)
		if len(rows) > 3 {
			t.Fatalf("a page of %d rows, want at most 3", len(rows))
		}
		got = append(got, rows...)
		next = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
			if !strings.Contains(next, "before=") || !strings.Contains(next, "ns="+w.ns) {
				t.Fatalf("the next page's link %s does not keep the filter and the keyset", next)
			}
		}
	}
	if !slices.Equal(names(got), names(want)) {
		t.Errorf("pages of 3 show %v\nwhole: %v", names(got), names(want))
	}
}

// chartOf reads the chart's data for the timeline's query, as timeline.js does.
func chartOf(t *testing.T, srv *httptest.Server, query string) (c struct {
	Step   int64   `json:"step"`
	T      []int64 `json:"t"`
	Series []struct {
		Label, Kind string
		Data        []int64
	} `json:"series"`
}) {
	t.Helper()
	_, page := get(t, srv, "/?"+query)
	if !strings.Contains(page, `data-src="`+html.EscapeString("/chart.json?"+query)+`"`) {
		t.Fatalf("the timeline of %s does not point its chart at /chart.json?%s", query, query)
	}
	code, body := get(t, srv, "/chart.json?"+query)
	if code != 200 {
		t.Fatalf("/chart.json?%s: %d %s", query, code, body)
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("chart data %q: %v", body, err)
	}
	return c
}

func TestTheChartCountsChangesPerResourceWithDeletesApart(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, nil)
	c := chartOf(t, srv, "range=6h&ns="+w.ns)
	if c.Step != 60 {
		t.Errorf("6 hours in buckets of %d s, want a minute", c.Step)
	}
	sums := map[string]int64{}
	for _, s := range c.Series {
		if len(s.Data) != len(c.T) {
			t.Fatalf("series %s has %d buckets for %d times", s.Label, len(s.Data), len(c.T))
		}
		for _, n := range s.Data {
			sums[s.Label+"/"+s.Kind] += n
		}
	}
	want := map[string]int64{"configmaps/change": 6, "secrets/change": 1, "deletes/delete": 1, "inferred deletes/inferred": 0}
	for k, n := range want {
		if sums[k] != n {
			t.Errorf("the chart counts %d %s, want %d (all: %v)", sums[k], k, n, sums)
		}
	}
	if c := chartOf(t, srv, "range=7d&ns="+w.ns); c.Step != 3600 {
		t.Errorf("7 days in buckets of %d s, want an hour", c.Step)
	}
}

func TestTheObjectPageShowsEveryVersionWithTheSameDiffAsKubeCDCHistory(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, nil)
	code, body := get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name="+w.appID)
	if code != 200 {
		t.Fatalf("object page: %d\n%s", code, body)
	}
	for _, want := range []string{`<span class="add">&#43;  color: blue</span>`, `<span class="del">-  color: red</span>`, "by alice-tool/Update", "by alice-tool/Update", `<span class="op">create</span>`, `<span class="op">update</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the object page lacks %s", want)
		}
	}
	if i, j := strings.Index(body, `<span class="op">update</span>`), strings.Index(body, `<span class="op">create</span>`); i > j {
		t.Error("the object page shows the create before the update: want newest first")
	}
	// Every line history prints under a version's header is on the page, escaped.
	cmd := exec.Command(binary, "history", "-c", cfgPath, "configmaps", w.appID, "-n", w.ns)
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kube-cdc history: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.Contains(body, ">"+strings.ReplaceAll(html.EscapeString(line), "+", "&#43;")+"</span>") {
			t.Errorf("history prints %q, the object page does not show it", line)
		}
	}
	// The deleted object: its delete is marked observed.
	_, body = get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name="+w.deletedName)
	if !strings.Contains(body, `<span class="op">delete</span>`) || !strings.Contains(body, `<span class="badge">observed</span>`) {
		t.Errorf("the deleted object's page does not show an observed delete")
	}
	if code, _ := get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name=never-was"); code != 404 {
		t.Errorf("an object with no history: %d, want 404", code)
	}
	if code, _ := get(t, srv, "/object?resource=configmaps"); code != 400 {
		t.Errorf("an object page without a name: %d, want 400", code)
	}
}

func TestWithoutAsOfOwnersAndActorsThePagesLeaveThemOut(t *testing.T) {
	w := theWorld(t)
	hideOptional(t)
	srv := newServer(t, nil)
	_, body := get(t, srv, "/?ns="+w.ns)
	if strings.Contains(body, `id="f-user"`) || strings.Contains(body, "<th>user</th>") || strings.Contains(body, `href="/asof`) {
		t.Error("the timeline offers users or as-of on a schema without change_actors or as_of")
	}
	_, filtered := get(t, srv, "/?ns="+w.ns+"&user=alice")
	if !slices.Equal(names(feedRows(t, filtered)), names(feedRows(t, body))) {
		t.Error("a user filter without actors changed the feed")
	}
	_, body = get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name=child")
	if strings.Contains(body, `id="owners"`) {
		t.Error("the object page shows owners on a schema without the owners view")
	}
	code, body := get(t, srv, "/asof?resource=configmaps&at="+url.QueryEscape(time.Now().UTC().Format(time.RFC3339)))
	if code != 200 || !strings.Contains(body, `id="asof-absent"`) {
		t.Errorf("the as-of page without as_of: %d, want 200 saying it is absent", code)
	}
}

// withActors stores an audit event (as the audit receiver does, migration 014) for each
// change alice-tool made, naming alice@example.com, so the real change_actors view joins
// them exactly (key and response RV); the events are deleted when the test ends.
func withActors(t *testing.T) {
	t.Helper()
	execSQL(t, `INSERT INTO kube_cdc.audit_events (audit_id, cluster, verb, api_group, resource, namespace, name,
			response_rv, response_uid, username, user_agent, code, request_at, stage_at)
		SELECT 'ui-test-' || id, cluster, op, api_group, resource, namespace, name, resource_version, uid,
		       'alice@example.com', 'kubectl/v1.36.5', 200, observed_at, observed_at
		  FROM kube_cdc.changes WHERE changed_by LIKE 'alice-tool/%'
		ON CONFLICT (audit_id) DO NOTHING`)
	t.Cleanup(func() { execSQL(t, `DELETE FROM kube_cdc.audit_events WHERE audit_id LIKE 'ui-test-%'`) })
}

// hideOptional renames the optional objects the pages probe for (as_of, owners,
// change_actors) so the schema looks like one migrated by a kube-cdc before them, and
// puts them back when the test ends.
func hideOptional(t *testing.T) {
	t.Helper()
	execSQL(t, `SET search_path = kube_cdc;
	ALTER FUNCTION as_of(timestamptz, text, text, text) RENAME TO hidden_as_of;
	ALTER VIEW owners RENAME TO hidden_owners;
	ALTER VIEW change_actors RENAME TO hidden_change_actors;`)
	t.Cleanup(func() {
		execSQL(t, `SET search_path = kube_cdc;
		ALTER FUNCTION hidden_as_of(timestamptz, text, text, text) RENAME TO as_of;
		ALTER VIEW hidden_owners RENAME TO owners;
		ALTER VIEW hidden_change_actors RENAME TO change_actors;`)
	})
}

func TestWithAsOfOwnersAndActorsThePagesShowOwnersChildrenUsersAndAsOf(t *testing.T) {
	w := theWorld(t)
	withActors(t)
	srv := newServer(t, nil)
	_, body := get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name=child")
	parentURL := html.EscapeString("/object?" + url.Values{"cluster": {cluster}, "name": {"parent"}, "ns": {w.ns}, "resource": {"configmaps"}}.Encode())
	if !strings.Contains(body, `<a class="owner" href="`+parentURL+`">ConfigMap parent</a> (controller)`) {
		t.Errorf("the child's page does not link its owner (want %s)", parentURL)
	}
	_, body = get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name=parent")
	if !strings.Contains(body, `<a class="child" href="`) || !strings.Contains(body, "ConfigMap child</a>") {
		t.Error("the parent's page does not link its child")
	}
	_, body = get(t, srv, "/?ns="+w.ns+"&user=alice@example.com")
	got := feedRows(t, body)
	if n := names(got); !slices.Equal(n, []string{"configmaps app-config update", "configmaps app-config create"}) {
		t.Errorf("user alice@example.com's changes: %v", n)
	}
	for _, r := range got {
		if r.user != "alice@example.com" {
			t.Errorf("row %+v does not show its user", r)
		}
	}
	_, body = get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name="+w.appID)
	if !strings.Contains(body, "user alice@example.com") {
		t.Error("the object page does not show the versions' user")
	}
	code, body := get(t, srv, "/asof?resource=configmaps&ns="+w.ns+"&at="+url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano)))
	if code != 200 || !strings.Contains(body, `id="asof"`) || !strings.Contains(body, ">app-config</a>") || strings.Contains(body, ">gone</a>") {
		t.Errorf("as of now: %d, want app-config listed and gone (deleted) not\n%s", code, body)
	}
}

func TestValuesFromTheClusterAreEscapedOnEveryPage(t *testing.T) {
	w := theWorld(t)
	withActors(t) // every column shown
	srv := newServer(t, nil)
	for _, path := range []string{"/?ns=" + w.ns, "/?ns=" + w.ns + "&name=" + w.xssName,
		"/object?resource=configmaps&ns=" + w.ns + "&name=" + w.xssName,
		"/asof?resource=configmaps&ns=" + w.ns + "&at=" + url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano)),
		"/?ns=" + url.QueryEscape(xssPayload), "/object?resource=configmaps&name=" + url.QueryEscape(xssPayload), "/status"} {
		code, body := get(t, srv, path)
		if code >= 500 {
			t.Fatalf("GET %s: %d", path, code)
		}
		for _, raw := range []string{"<script>window", "<img src=x", `onerror="window`} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s: the page holds %q unescaped", path, raw)
			}
		}
	}
	_, body := get(t, srv, "/object?resource=configmaps&ns="+w.ns+"&name="+w.xssName)
	if !strings.Contains(body, "&lt;script&gt;window.__xss=1&lt;/script&gt;") {
		t.Error("the object page does not show the annotation's markup as text")
	}
}

func TestSecretValuesAppearOnlyAsDigests(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, nil)
	_, body := get(t, srv, "/object?resource=secrets&ns="+w.ns+"&name=db-password")
	if !strings.Contains(body, "password:") {
		t.Fatalf("the Secret's page does not show its data key\n%s", body)
	}
	if strings.Contains(body, w.secretValue) || strings.Contains(body, "aHVudGVyMi1wbGFpbi12YWx1ZQ") {
		t.Error("the Secret's page shows its value")
	}
}

func TestTheStatusPageShowsTheCheckpointsAsKubeCDCStatusDoes(t *testing.T) {
	theWorld(t)
	srv := newServer(t, nil)
	code, body := get(t, srv, "/status")
	if code != 200 {
		t.Fatalf("status: %d\n%s", code, body)
	}
	for _, want := range []string{"warehouse", "configmaps", "secrets", `&#34;checkpointStore&#34;: &#34;postgres&#34;`} {
		if !strings.Contains(body, want) {
			t.Errorf("the status page lacks %s", want)
		}
	}
	srv = newServer(t, func(o *ui.Options) { o.Status = nil })
	if code, _ := get(t, srv, "/status"); code != 404 {
		t.Errorf("without Options.Status, /status: %d, want 404", code)
	}
}

func TestAFleetDatabaseShowsAClusterPickerAndEachClustersFeed(t *testing.T) {
	w := theWorld(t)
	execSQL(t, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version) VALUES ('other', 'warehouse', '', 'configmaps', 1)`)
	t.Cleanup(func() { execSQL(t, `DELETE FROM kube_cdc.checkpoints WHERE cluster = 'other'`) })
	srv := newServer(t, nil)
	_, body := get(t, srv, "/?ns="+w.ns)
	if !strings.Contains(body, `id="cluster-picker"`) || !strings.Contains(body, `<option value="other">other</option>`) {
		t.Error("a database of two clusters shows no picker")
	}
	if !strings.Contains(body, `<input type="hidden" name="ns" value="`+w.ns+`">`) {
		t.Error("the picker drops the page's filters")
	}
	_, body = get(t, srv, "/?cluster=other&ns="+w.ns)
	if rows := feedRows(t, body); len(rows) != 0 {
		t.Errorf("cluster other's feed shows cluster %s's changes: %v", cluster, names(rows))
	}
}

func TestATokenOrATrustedHeaderIsDemandedWhenConfigured(t *testing.T) {
	theWorld(t)
	srv := newServer(t, func(o *ui.Options) { o.Token = "s3cret" })
	for _, c := range []struct {
		set  func(h map[string]string)
		want int
	}{
		{func(map[string]string) {}, 401},
		{func(h map[string]string) { h["Authorization"] = "Bearer wrong" }, 401},
		{func(h map[string]string) { h["Authorization"] = "Bearer s3cret" }, 200},
		{func(h map[string]string) { h["Authorization"] = "Basic dTpzM2NyZXQ=" }, 200}, // u:s3cret
	} {
		h := map[string]string{}
		c.set(h)
		if got := statusOf(t, srv.URL+"/", h); got != c.want {
			t.Errorf("headers %v: %d, want %d", h, got, c.want)
		}
	}
	srv = newServer(t, func(o *ui.Options) { o.TrustedHeader = "X-Forwarded-User" })
	if got := statusOf(t, srv.URL+"/", nil); got != 403 {
		t.Errorf("without the proxy's header: %d, want 403", got)
	}
	if got := statusOf(t, srv.URL+"/", map[string]string{"X-Forwarded-User": "bob"}); got != 200 {
		t.Errorf("with the proxy's header: %d, want 200", got)
	}
}

func TestKubeCDCUIServesTheSinkOnLoopbackBehindItsToken(t *testing.T) {
	theWorld(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "ui", "-c", cfgPath, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey, "KUBE_CDC_UI__TOKEN=tok-123")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line := make([]byte, 200)
	n, err := stdout.Read(line)
	if err != nil {
		t.Fatalf("kube-cdc ui printed no address: %v\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(string(line[:n]))
	if m == nil {
		t.Fatalf("kube-cdc ui printed %q, want its loopback URL", line[:n])
	}
	base := "http://" + m[1]
	if got := statusOf(t, base+"/", nil); got != 401 {
		t.Errorf("without the token: %d, want 401", got)
	}
	if got := statusOf(t, base+"/?ns=ui-world", map[string]string{"Authorization": "Bearer tok-123"}); got != 200 {
		t.Errorf("with the token: %d, want 200\n%s", got, stderr.String())
	}
	if got := statusOf(t, base+"/status", map[string]string{"Authorization": "Bearer tok-123"}); got != 200 {
		t.Errorf("the status page: %d, want 200\n%s", got, stderr.String())
	}
}

func TestRunServesTheUIWhenUIAddressIsSet(t *testing.T) {
	w := theWorld(t)
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "http://"+runUI+"/?ns="+w.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("kube-cdc run with ui.address %s: %v", runUI, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !slices.Contains(names(feedRows(t, string(b))), "configmaps app-config update") {
		t.Errorf("the UI run serves: %d, want the feed of %s", resp.StatusCode, w.ns)
	}
}

// The page of what changed before a pod broke marks the inferred delete of a ConfigMap
// the pod reads and says why kube-cdc wrote it (rows written as kube-cdc writes them, as
// TestInferredDeletesAndEpochsAreMarked does, under a cluster of its own).
func TestTheWhyPageMarksAnInferredDeleteWithItsReason(t *testing.T) {
	pod := `{"kind":"Pod","metadata":{"name":"reader","namespace":"ns","uid":"p1"},"spec":{"containers":[{"name":"app","envFrom":[{"configMapRef":{"name":"cm"}}]}]}}`
	execSQL(t, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version) VALUES ('synthetic-why', 'warehouse', '', 'configmaps', 30);
	INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, inferred, reason, snapshot, object, epoch, observed_at) VALUES
	  ('synthetic-why', '', 'configmaps', 'ns', 'cm', 'u1', 10, 'create', false, NULL, false, '{"kind":"ConfigMap","data":{"a":"1"}}', 0, now() - interval '3 minutes'),
	  ('synthetic-why', '', 'configmaps', 'ns', 'cm', 'u1', 20, 'delete', true, 'gone', false, NULL, 0, now() - interval '2 minutes'),
	  ('synthetic-why', '', 'pods', 'ns', 'reader', 'p1', 25, 'create', false, NULL, false, '`+pod+`', 0, now() - interval '1 minute');
	INSERT INTO kube_cdc.objects (cluster, api_group, api_version, resource, kind, namespace, name, uid, resource_version, object)
	  VALUES ('synthetic-why', '', 'v1', 'pods', 'Pod', 'ns', 'reader', 'p1', 25, '`+pod+`')`)
	t.Cleanup(func() {
		execSQL(t, `DELETE FROM kube_cdc.changes WHERE cluster = 'synthetic-why'; DELETE FROM kube_cdc.objects WHERE cluster = 'synthetic-why';
			DELETE FROM kube_cdc.checkpoints WHERE cluster = 'synthetic-why'`)
	})
	srv := newServer(t, nil)
	_, body := get(t, srv, "/why?cluster=synthetic-why&resource=pods&ns=ns&name=reader&at="+url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano)))
	if !strings.Contains(body, `configmaps ns/cm</a>`) || !strings.Contains(body, `<span class="badge inferred">inferred (gone)</span>`) {
		t.Errorf("the why page of a pod whose ConfigMap's delete was inferred does not mark it with its reason:\n%s", body)
	}
}

// Inferred deletes and time travel cannot be made cheaply through the apiserver here (a
// daemon stopped while an object is deleted; an etcd restore), so this test writes the
// rows kube-cdc writes for them, under a cluster of its own.
func TestInferredDeletesAndEpochsAreMarked(t *testing.T) {
	execSQL(t, `INSERT INTO kube_cdc.checkpoints (cluster, sink, api_group, resource, resource_version) VALUES ('synthetic', 'warehouse', '', 'configmaps', 30);
	INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, inferred, reason, snapshot, object, epoch, observed_at) VALUES
	  ('synthetic', '', 'configmaps', 'ns', 'cm', 'u1', 10, 'create', false, NULL, false, '{"kind":"ConfigMap","data":{"a":"1"}}', 0, now() - interval '3 minutes'),
	  ('synthetic', '', 'configmaps', 'ns', 'cm', 'u1', 20, 'delete', true, 'gone', false, NULL, 0, now() - interval '2 minutes'),
	  ('synthetic', '', 'configmaps', 'ns', 'cm', 'u2', 5, 'create', false, NULL, true, '{"kind":"ConfigMap","data":{"a":"2"}}', 1, now() - interval '1 minute')`)
	t.Cleanup(func() {
		execSQL(t, `DELETE FROM kube_cdc.changes WHERE cluster = 'synthetic'; DELETE FROM kube_cdc.checkpoints WHERE cluster = 'synthetic'`)
	})
	srv := newServer(t, nil)
	_, body := get(t, srv, "/?cluster=synthetic&flag=inferred")
	if n := names(feedRows(t, body)); !slices.Equal(n, []string{"configmaps cm delete"}) {
		t.Errorf("the inferred deletes: %v", n)
	}
	if !strings.Contains(body, "inferred: gone</span>") {
		t.Error("the feed does not show the inferred delete's reason")
	}
	_, body = get(t, srv, "/?cluster=synthetic&flag=snapshot")
	if n := names(feedRows(t, body)); !slices.Equal(n, []string{"configmaps cm create"}) {
		t.Errorf("the snapshot rows: %v", n)
	}
	c := chartOf(t, srv, "cluster=synthetic")
	for _, s := range c.Series {
		var sum int64
		for _, n := range s.Data {
			sum += n
		}
		if want := map[string]int64{"configmaps": 2, "deletes": 0, "inferred deletes": 1}[s.Label]; sum != want {
			t.Errorf("the chart counts %d %s, want %d", sum, s.Label, want)
		}
	}
	_, body = get(t, srv, "/object?cluster=synthetic&resource=configmaps&ns=ns&name=cm")
	for _, want := range []string{`<span class="badge inferred">inferred (gone)</span>`, `class="epoch-mark">epoch 1 begins`, `<span class="badge snapshot"`,
		"(no object: kube-cdc inferred this delete, reason gone; the last state it saw is the version before)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the object page lacks %s", want)
		}
	}
	if strings.Count(body, "epoch-mark") != 1 {
		t.Errorf("the object page marks %d epoch starts, want 1", strings.Count(body, "epoch-mark"))
	}
}

func TestKubeCDCUIRefusesASchemaWithoutKubeCDCsTables(t *testing.T) {
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	wrong := strings.Replace(string(b), "    postgres:\n", "    postgres:\n      schema: not_migrated\n", 1)
	if err := os.WriteFile(cfg, []byte(wrong), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "ui", "-c", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBE_CDC_TRANSFORMS__DIGESTKEY="+digestKey)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("kube-cdc ui served a schema without kube-cdc's tables")
	}
	if err == nil || !strings.Contains(string(out), "schema not_migrated has no kube-cdc tables") {
		t.Errorf("kube-cdc ui on a schema without tables: %v\n%s", err, out)
	}
}
