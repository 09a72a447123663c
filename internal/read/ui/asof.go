package ui

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/moment"
	"github.com/kube-cdc/kube-cdc/internal/read/columns"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// asOfPage is a resource's objects as they were at a moment, as as_of() (migration 013)
// returns them, in kubectl get's columns for their kind (internal/read/columns).
type asOfPage struct {
	page
	At, Resource, Namespace string
	Parsed                  time.Time // the moment At was read as
	ParsedText              string    // Parsed in the page's zone
	Resources               []string
	Columns                 []string // after namespace (when every namespace is shown) and name
	AllNamespaces           bool
	Span                    int // the table's column count
	Rows                    []asOfRow
	Truncated               bool
	Asked                   bool
}

// asOfRow is one object: its name linking the version shown, its kind's cells, its
// resourceVersion then and its health then (the row's colour).
type asOfRow struct {
	Namespace, Name, URL string
	Cells                []columns.Cell
	RV                   string
	Health, HealthReason string
}

const asOfLimit = 500

func (s *Server) asOf(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "As of")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	ap := asOfPage{page: p, At: strings.TrimSpace(q.Get("at")), Resource: q.Get("resource"), Namespace: q.Get("ns")}
	if ap.At == "" {
		ap.At = "now"
	}
	if ap.Resources, err = s.resources(r.Context(), p.Cluster); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if !p.Features.AsOf || ap.Resource == "" {
		ap.finish()
		s.render(w, "asof", ap)
		return
	}
	// As `kube-cdc as-of` reads its TIME: now, RFC 3339, or a duration back (15m, 2h).
	at, err := moment.Parse(ap.At, s.o.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("at %w", err))
		return
	}
	res, err := s.resolveResource(r.Context(), p.Cluster, ap.Resource)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ap.Resource = res.ID()
	ap.Parsed, ap.ParsedText = at, when(at, p.Zone)
	ap.Asked = true
	ap.AllNamespaces = ap.Namespace == ""
	objs, err := s.o.Store.AsOf(r.Context(), store.AsOfQuery{At: at, Group: res.Group, Resource: res.Resource, Namespace: ap.Namespace,
		AllNamespaces: ap.AllNamespaces, Cluster: p.Cluster, Limit: asOfLimit + 1})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(objs) > asOfLimit {
		objs, ap.Truncated = objs[:asOfLimit], true
	}
	ap.Columns = columns.For(res.Group, res.Resource)
	ap.Span = len(ap.Columns) + 2
	if ap.AllNamespaces {
		ap.Span++
	}
	for _, o := range objs {
		row := asOfRow{Namespace: o.Namespace, Name: o.Name, RV: o.RV.String(),
			URL: objectURL(p.Cluster, res.Group, res.Resource, o.Namespace, o.Name)}
		if o.ChangeID != 0 {
			// The version shown at that moment, on the object's page (its article's id).
			row.URL = versionURL(row.URL, o.ChangeID)
		}
		c, err := columns.Of(res.Group, res.Resource, o.Object, at)
		if err != nil {
			// One object the columns cannot read is shown by name, never the page refused.
			s.o.Log.Warn("ui: as-of columns", "key", o.Namespace+"/"+o.Name, "err", err)
			c.Cells = make([]columns.Cell, len(ap.Columns))
			c.Cells[0] = columns.Cell{Text: "<undecodable>", Full: err.Error()}
		}
		row.Cells, row.Health, row.HealthReason = c.Cells, string(c.Health.State), c.Health.Reason
		ap.Rows = append(ap.Rows, row)
	}
	ap.finish()
	s.render(w, "asof", ap)
}
