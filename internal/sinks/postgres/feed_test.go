package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// feedNames is the names of a feed page's rows, newest first.
func feedNames(p store.FeedPage) []string {
	var out []string
	for _, r := range p.Rows {
		out = append(out, r.Name)
	}
	return out
}

// The web UI's feed (store.Feed) over the sink's own writes, one change a second: each
// name filter finds what a person typed, a search no index serves stops after its window
// and says where, and a newer page read upwards is the page before.
func TestTheFeedsNameFiltersPagingAndBoundedSearchReadWhatTheSinkWrote(t *testing.T) {
	s, _ := newSink(t, Options{})
	base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	names := []string{"checkout-config", "frontend", "Checkout-web-1", "cart", "checkout-web-2", "payments", "checkout_x", "db"}
	var changes []change.Change
	for i := range 24 { // three rounds of the eight names
		c := cm(names[i%len(names)], "uid-"+names[i%len(names)], change.RV(100+i), change.OpUpdate)
		if i < len(names) {
			c.Op = change.OpCreate
		}
		c.ObservedAt = base.Add(time.Duration(i) * time.Second)
		changes = append(changes, c)
	}
	write(t, s, batch(123, changes...))
	r := readerOf(t, s)
	ctx := testCtx(t)
	f := store.Filter{Cluster: cluster, From: base, To: base.Add(time.Hour)}
	feed := func(f store.Filter, limit int) store.FeedPage {
		t.Helper()
		p, err := r.Feed(ctx, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		match store.NameMatch
		want  []string // the distinct names found, sorted
	}{
		{"checkout", store.NameSubstring, []string{"Checkout-web-1", "checkout-config", "checkout-web-2", "checkout_x"}},
		{"CHECKOUT-", store.NameSubstring, []string{"Checkout-web-1", "checkout-config", "checkout-web-2"}},
		{"out_", store.NameSubstring, []string{"checkout_x"}}, // _ is a character, not LIKE's wildcard
		{"checkout-web*", store.NamePrefix, nil},              // the UI strips the star: a prefix of "checkout-web*" matches nothing
		{"checkout-web", store.NamePrefix, []string{"Checkout-web-1", "checkout-web-2"}},
		{"config", store.NamePrefix, nil},
		{"^checkout-web-[0-9]+$", store.NameRegex, []string{"Checkout-web-1", "checkout-web-2"}},
		{"checkout-config", store.NameExact, []string{"checkout-config"}},
		{"checkout", store.NameExact, nil},
	} {
		g := f
		g.Name, g.NameMatch = tc.name, tc.match
		p := feed(g, 100)
		got := slices.Compact(slices.Sorted(slices.Values(feedNames(p))))
		if !slices.Equal(got, tc.want) || p.More || p.Stopped != nil {
			t.Errorf("name %q (match %d) found %v (more %v, stopped %v), want %v", tc.name, tc.match, got, p.More, p.Stopped, tc.want)
		}
	}

	// Paging: older pages by keyset, then newer from the third page returns to the second.
	first := feed(f, 5)
	if !first.More || len(first.Rows) != 5 || first.Rows[0].RV != 123 {
		t.Fatalf("the first page: %d rows from rv %d, more %v; want 5 from rv 123 and more", len(first.Rows), first.Rows[0].RV, first.More)
	}
	older := func(p store.FeedPage) store.Filter {
		g := f
		last := p.Rows[len(p.Rows)-1]
		g.Before, g.BeforeAt = last.ID, last.ObservedAt
		return g
	}
	second := feed(older(first), 5)
	third := feed(older(second), 5)
	g := f
	g.After, g.AfterAt = third.Rows[0].ID, third.Rows[0].ObservedAt
	back := feed(g, 5)
	if fmt.Sprint(feedNames(back)) != fmt.Sprint(feedNames(second)) || back.Rows[0].ID != second.Rows[0].ID || !back.More {
		t.Errorf("newer from the third page shows %v (more %v), want the second page %v and more above it", feedNames(back), back.More, feedNames(second))
	}
	g.After, g.AfterAt = second.Rows[0].ID, second.Rows[0].ObservedAt
	if top := feed(g, 5); top.More || top.Rows[0].ID != first.Rows[0].ID || len(top.Rows) != 5 {
		t.Errorf("newer from the second page shows %v (more %v), want the first page %v and nothing above", feedNames(top), top.More, feedNames(first))
	}

	// A bounded search: "payments" changes at seconds 5, 13 and 21; a window of 4 from the
	// newest (second 23) reads seconds 23..20, finds the one at 21, and stops at 20.
	g = f
	g.Name, g.Window = "payments", 4
	p := feed(g, 5)
	if len(p.Rows) != 1 || p.Rows[0].RV != 121 || p.Stopped == nil || !p.Stopped.At.Equal(base.Add(20*time.Second)) {
		t.Fatalf("payments within a window of 4: rvs %v, stopped %v; want rv 121 and a stop at second 20", p.Rows, p.Stopped)
	}
	g.Before, g.BeforeAt = p.Stopped.ID, p.Stopped.At
	if p := feed(g, 5); len(p.Rows) != 0 || p.Stopped == nil || !p.Stopped.At.Equal(base.Add(16*time.Second)) {
		t.Errorf("the search continued below second 20: %d rows, stopped %v; want none and a stop at second 16", len(p.Rows), p.Stopped)
	} else {
		g.Before, g.BeforeAt = p.Stopped.ID, p.Stopped.At
		if p := feed(g, 5); len(p.Rows) != 1 || p.Rows[0].RV != 113 {
			t.Errorf("the search continued below second 16: %v, want rv 113", p.Rows)
		}
	}

	if err := r.CheckRegex(ctx, "checkout-(web"); !errors.Is(err, store.ErrBadRegex) || !strings.Contains(err.Error(), "parentheses") {
		t.Errorf("CheckRegex of an unbalanced parenthesis: %v, want ErrBadRegex saying why", err)
	}
	if err := r.CheckRegex(ctx, "^checkout-[0-9]+$"); err != nil {
		t.Errorf("CheckRegex of a good expression: %v", err)
	}
	for _, tc := range []struct {
		from, to time.Time
		limit    int
		want     int
	}{
		{base, time.Time{}, 100, 24},
		{base.Add(10 * time.Second), base.Add(20 * time.Second), 100, 10},
		{base, time.Time{}, 7, 7},
	} {
		if n, err := r.RangeCount(ctx, cluster, tc.from, tc.to, tc.limit); err != nil || n != tc.want {
			t.Errorf("RangeCount(%s, %s, %d) = %d, %v; want %d", tc.from, tc.to, tc.limit, n, err, tc.want)
		}
	}
}
