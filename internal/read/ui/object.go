package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/history"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// version is one changes row of the object page, newest first, with its diff.
type version struct {
	history.Entry
	Epoch                     int
	EpochMark                 bool // the first version seen in its epoch after one in an earlier epoch
	User, Impersonator, Match string
	Lines                     []diffLine
}

type diffLine struct {
	Class, Text string // Class: add | del | hunk | head | ""
}

type link struct {
	Label, URL, Note string
}

type objectPage struct {
	page
	Resource, Namespace, Name string
	Versions                  []version
	Owners, Children          []link
	TimelineURL               string
}

// versionsSQL is postgres.historySQL (what `kube-cdc history` reads) with the epoch and,
// when actors exist, the user: the same rows and the same previous object, so the page
// shows the same diff. $1 cluster, $2 group, $3 resource, $4 namespace, $5 name.
const versionsSQL = `SELECT h.id, h.observed_at, h.op, h.resource_version, h.uid, h.changed_by, h.inferred, coalesce(h.reason, ''),
		h.snapshot, h.object, h.previous, h.epoch, %[2]s
	  FROM (SELECT id, observed_at, op, resource_version, uid, changed_by, inferred, reason, snapshot, object, epoch,
	               CASE WHEN lag(op) OVER w <> 'delete' AND (lag(uid) OVER w = uid OR '' IN (uid, lag(uid) OVER w))
	                    THEN lag(object) OVER w END AS previous
	          FROM %[1]s.changes
	         WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND namespace = $4 AND name = $5
	        WINDOW w AS (ORDER BY id)) h %[3]s
	 ORDER BY h.id`

func (s *Server) versions(ctx context.Context, cluster, group, resource, namespace, name string, actors bool) ([]version, error) {
	cols, join := "'', '', ''", ""
	if actors {
		cols = "coalesce(a.username, ''), coalesce(a.impersonator, ''), coalesce(a.match, '')"
		join = postgres.ActorJoinSQL(s.schema, "x.username, x.impersonator, x.match")
	}
	rows, err := s.o.Pool.Query(ctx, fmt.Sprintf(versionsSQL, s.schema, cols, join), cluster, group, resource, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("read the versions: %w", err)
	}
	var raw []postgres.Version
	var extra []version
	for rows.Next() {
		var v postgres.Version
		var x version
		var op string
		if err := rows.Scan(&v.ID, &v.ObservedAt, &op, &v.RV, &v.UID, &v.ChangedBy, &v.Inferred, &v.Reason, &v.Snapshot,
			&v.Object, &v.Previous, &x.Epoch, &x.User, &x.Impersonator, &x.Match); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the versions: %w", err)
		}
		v.Op = change.Op(op)
		raw = append(raw, v)
		extra = append(extra, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the versions: %w", err)
	}
	entries, err := history.Show(raw)
	if err != nil {
		return nil, err
	}
	out := make([]version, len(entries))
	for i, e := range entries {
		x := extra[i]
		x.Entry = e
		x.EpochMark = i > 0 && extra[i-1].Epoch < x.Epoch
		// As history's header shows them: a user or manager holding a character that
		// reorders text cannot pass for another. The diff is already shown so (Diff).
		x.ChangedBy, x.User, x.Impersonator = history.Visible(e.ChangedBy), history.Visible(x.User), history.Visible(x.Impersonator)
		x.Lines = diffLines(e.Diff())
		out[i] = x
	}
	slices.Reverse(out) // newest first, as the feed
	return out, nil
}

// diffLines classes each line of a unified diff for highlighting.
func diffLines(d string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		c := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			c = "head"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		}
		out = append(out, diffLine{Class: c, Text: l})
	}
	return out
}

// relations reads the object's owners and children from the view owners (migration 013).
func (s *Server) relations(ctx context.Context, cluster, group, resource, namespace, name, uid string) (owners, children []link, err error) {
	rows, err := s.o.Pool.Query(ctx, fmt.Sprintf(`SELECT owner_api_group, owner_resource, owner_kind, owner_name, coalesce(controller, false)
		  FROM %s.owners WHERE cluster = $1 AND api_group = $2 AND resource = $3 AND namespace = $4 AND name = $5
		 ORDER BY owner_kind, owner_name`, s.schema), cluster, group, resource, namespace, name)
	if err != nil {
		return nil, nil, fmt.Errorf("read the owners: %w", err)
	}
	owners, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (link, error) {
		var g, res, kind, n string
		var controller bool
		err := r.Scan(&g, &res, &kind, &n, &controller)
		l := link{Label: kind + " " + n, URL: objectURL(cluster, g, res, namespace, n)}
		if controller {
			l.Note = "controller"
		}
		return l, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the owners: %w", err)
	}
	if uid == "" {
		return owners, nil, nil
	}
	rows, err = s.o.Pool.Query(ctx, fmt.Sprintf(`SELECT api_group, resource, kind, namespace, name
		  FROM %s.owners WHERE cluster = $1 AND owner_uid = $2 ORDER BY kind, namespace, name LIMIT 200`, s.schema), cluster, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("read the children: %w", err)
	}
	children, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (link, error) {
		var g, res, kind, ns, n string
		err := r.Scan(&g, &res, &kind, &ns, &n)
		return link{Label: kind + " " + n, URL: objectURL(cluster, g, res, ns, n)}, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the children: %w", err)
	}
	return owners, children, nil
}

func (s *Server) object(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "Object")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	op := objectPage{page: p, Resource: q.Get("resource"), Namespace: q.Get("ns"), Name: q.Get("name")}
	if op.Resource == "" || op.Name == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("resource and name are required (ns for a namespaced object)"))
		return
	}
	op.Title = op.Resource + " " + change.Key{Namespace: op.Namespace, Name: op.Name}.String()
	group, resource := parseResource(op.Resource)
	if op.Versions, err = s.versions(r.Context(), p.Cluster, group, resource, op.Namespace, op.Name, p.Features.Actors); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if p.Features.Owners {
		uid := ""
		if len(op.Versions) > 0 {
			uid = op.Versions[0].UID
		}
		if op.Owners, op.Children, err = s.relations(r.Context(), p.Cluster, group, resource, op.Namespace, op.Name, uid); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
	}
	tl := filter{Namespace: op.Namespace, Resource: op.Resource, Name: op.Name, Range: "30d"}
	op.TimelineURL = "/?" + tl.values(p.Cluster, true).Encode()
	if len(op.Versions) == 0 {
		w.WriteHeader(http.StatusNotFound)
	}
	op.finish()
	s.render(w, "object", op)
}

// asOfPage is a resource's objects in a namespace as they were at a moment, as as_of()
// (migration 013) returns them: its columns are shown as they come.
type asOfPage struct {
	page
	At, Resource, Namespace string
	Resources               []string
	Columns                 []string
	Rows                    [][]cell
	Truncated               bool
	Asked                   bool
}

type cell struct {
	Text, URL string
}

const asOfLimit = 500

func (s *Server) asOf(w http.ResponseWriter, r *http.Request) {
	p, err := s.frame(r, "As of")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	ap := asOfPage{page: p, At: q.Get("at"), Resource: q.Get("resource"), Namespace: q.Get("ns")}
	if ap.Resources, err = s.resources(r.Context(), p.Cluster); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if !p.Features.AsOf || ap.At == "" || ap.Resource == "" {
		ap.finish()
		s.render(w, "asof", ap)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, ap.At)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("at %q: want an RFC 3339 time (2026-01-02T15:04:05Z)", ap.At))
		return
	}
	ap.Asked = true
	var ns *string
	if ap.Namespace != "" {
		ns = &ap.Namespace
	}
	rows, err := s.o.Pool.Query(r.Context(), fmt.Sprintf(`SELECT * FROM %s.as_of($1, $2, $3, $4) LIMIT %d`, s.schema, asOfLimit+1),
		at, ap.Resource, ns, p.Cluster)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, fmt.Errorf("as_of: %w", err))
		return
	}
	defer rows.Close()
	nsCol, nameCol := -1, -1
	for i, fd := range rows.FieldDescriptions() {
		ap.Columns = append(ap.Columns, fd.Name)
		switch fd.Name {
		case "namespace":
			nsCol = i
		case "name":
			nameCol = i
		}
	}
	group, resource := parseResource(ap.Resource)
	for rows.Next() {
		if len(ap.Rows) == asOfLimit {
			ap.Truncated = true
			break
		}
		vals, err := rows.Values()
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, fmt.Errorf("as_of: %w", err))
			return
		}
		cells := make([]cell, len(vals))
		for i, v := range vals {
			cells[i] = cell{Text: cellText(v)}
		}
		if nameCol >= 0 {
			namespace := ap.Namespace
			if nsCol >= 0 {
				namespace = cells[nsCol].Text
			}
			cells[nameCol].URL = objectURL(p.Cluster, group, resource, namespace, cells[nameCol].Text)
		}
		ap.Rows = append(ap.Rows, cells)
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, http.StatusInternalServerError, fmt.Errorf("as_of: %w", err))
		return
	}
	ap.finish()
	s.render(w, "asof", ap)
}

// cellText shows a value of any column; long ones (objects) are cut.
func cellText(v any) string {
	var t string
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		t = x
	case time.Time:
		t = history.FormatTime(x)
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		t = string(b)
	default:
		t = fmt.Sprint(x)
	}
	if len(t) > 200 {
		t = t[:200] + "…"
	}
	return t
}
