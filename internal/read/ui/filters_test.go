package ui_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestTheFeedReadsNamesUsersAndResourcesAsPeopleTypeThem(t *testing.T) {
	w := theWorld(t)
	withActors(t)
	srv := newServer(t, nil)
	q := "/?ns=" + w.ns
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"&name=config", []string{"configmaps app-config update", "configmaps app-config create"}}, // a substring
		{"&name=APP", []string{"configmaps app-config update", "configmaps app-config create"}},    // any case
		{"&name=pa*", []string{"configmaps parent create"}},                                        // a prefix
		{"&name=ent*", nil}, // a prefix, not a substring
		{"&name==app", nil}, // exact
		{"&name==child", []string{"configmaps child create"}}, // exact
		{"&name=" + url.QueryEscape("~^(child|gone)$"), []string{"configmaps gone delete", "configmaps gone create", "configmaps child create"}},
		{"&user=ALICE", []string{"configmaps app-config update", "configmaps app-config create"}}, // a part of the user, any case
		{"&resource=cm&name=app", []string{"configmaps app-config update", "configmaps app-config create"}},
		{"&resource=ConfigMap&op=delete", []string{"configmaps gone delete"}},
		{"&resource=SECRETS", []string{"secrets db-password create"}},
		{"&resource=secret", []string{"secrets db-password create"}},
	} {
		code, body := get(t, srv, q+c.query)
		if code != 200 {
			t.Fatalf("GET %s: %d\n%s", q+c.query, code, body)
		}
		if got := names(feedRows(t, body)); !slices.Equal(got, c.want) {
			t.Errorf("%s: the feed shows %v, want %v", c.query, got, c.want)
		}
	}
	// The resource typed as a short name is shown as the form's choice.
	if _, body := get(t, srv, q+"&resource=cm"); !strings.Contains(body, `<option value="configmaps" selected>`) {
		t.Error("resource=cm does not select configmaps in the form")
	}
	for query, want := range map[string]string{
		"&name=" + url.QueryEscape("~checkout-(web"): `name &#34;~checkout-(web&#34;: invalid regular expression: parentheses () not balanced`,
		"&resource=widgets":                          `resource &#34;widgets&#34;: none of the resources cluster ui-test records`,
	} {
		code, body := get(t, srv, q+query)
		if code != 400 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 400 saying %s\n%s", q+query, code, want, body)
		}
		if code, _ := get(t, srv, "/chart.json?"+strings.TrimPrefix(q, "/?")+query); code != 400 {
			t.Errorf("GET /chart.json?%s%s: %d, want 400", strings.TrimPrefix(q, "/?"), query, code)
		}
	}
}

func TestTheEmptyFeedSaysWhetherTheRangeOrTheFiltersLeftNothing(t *testing.T) {
	w := theWorld(t)
	srv := newServer(t, nil)
	_, body := get(t, srv, "/?ns="+w.ns+"&name=no-such-name")
	if !strings.Contains(body, "The filters excluded all ") || strings.Contains(body, "No changes in this range") {
		t.Errorf("a filter that matches nothing: the page does not say the filters excluded the range's changes\n%s", body)
	}
	_, body = get(t, srv, "/?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z")
	if !strings.Contains(body, "No changes in this range.") {
		t.Error("an empty range without filters does not say the range is empty")
	}
	_, body = get(t, srv, "/?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z&ns="+w.ns)
	if !strings.Contains(body, "No changes in this range.") {
		t.Error("an empty range with a filter blames the filter, not the range")
	}
}
