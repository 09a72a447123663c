package ui_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// An object page diffs the newest versions only (each version's YAML is most of the
// page's time), links every version, and a link to one older version (as-of's) diffs it.
func TestAnObjectPageDiffsTheNewestVersionsAndLinksEveryOneAndAnOlderVersionAskedFor(t *testing.T) {
	const c, versions = "versions-cluster", 23
	var rows []string
	for i := 1; i <= versions; i++ {
		rows = append(rows, fmt.Sprintf(`('%s', '', 'configmaps', 'ns', 'many', 'uid-m', %d, '%s',
		  '{"metadata":{"name":"many","namespace":"ns"},"data":{"n":"%d"}}', now() - interval '%d seconds')`,
			c, i, map[bool]string{true: "create", false: "update"}[i == 1], i, versions-i))
	}
	execSQL(t, `INSERT INTO kube_cdc.changes (cluster, api_group, resource, namespace, name, uid, resource_version, op, object, observed_at) VALUES `+
		strings.Join(rows, ",\n"))
	t.Cleanup(func() { execSQL(t, `DELETE FROM kube_cdc.changes WHERE cluster = '`+c+`'`) })
	srv := newServer(t, nil)
	shown := regexp.MustCompile(`<article class="version[^"]*" id="v(\d+)">`)
	base := "/object?cluster=" + c + "&resource=configmaps&ns=ns&name=many"

	_, body := get(t, srv, base)
	if n := len(shown.FindAllString(body, -1)); n != 20 {
		t.Errorf("the page diffs %d versions, want the newest 20", n)
	}
	// The oldest version diffed is compared with the one before it, not shown whole.
	if !strings.Contains(body, `<span class="del">-  &#34;n&#34;: &#34;3&#34;</span>`) {
		t.Errorf("the oldest version diffed (rv 4) is not diffed against rv 3:\n%s", body[max(strings.LastIndex(body, `<article`), 0):])
	}
	if !strings.Contains(body, `id="all-versions"`) || !strings.Contains(body, "of 23") {
		t.Error("the page does not offer every one of the 23 versions")
	}
	var oldest string
	if err := pool.QueryRow(testCtx(t), `SELECT min(id)::text FROM kube_cdc.changes WHERE cluster = $1`, c).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"all=1": base + "&all=1", "v= the oldest": base + "&v=" + oldest} {
		_, body = get(t, srv, path)
		if n := len(shown.FindAllString(body, -1)); n != versions {
			t.Errorf("%s: the page diffs %d versions, want all %d", name, n, versions)
		}
		if strings.Contains(body, `id="all-versions"`) {
			t.Errorf("%s: the page showing every version still offers them", name)
		}
	}
}
