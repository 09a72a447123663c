package store

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// HealthVersion is a version whose health the caller computes: the timeline's health
// series.
type HealthVersion struct {
	Group, Resource, Namespace, Name string
	ObservedAt                       time.Time
	Op                               change.Op
	Object                           json.RawMessage // nil for an inferred delete
}

// HealthVersions returns the versions of the resources named that the filter selects
// (Before aside), in observation order, with their objects: at most limit, and whether
// more follow. Like Counts, its conditions are the chart's filters (feed.go), and the
// rows come from changes_feed (cluster, observed_at, id) over the range, the resources
// checked on each row.
func (s *Store) HealthVersions(ctx context.Context, f Filter, resources []change.Resource, limit int) ([]HealthVersion, bool, error) {
	if len(resources) == 0 {
		return nil, false, nil
	}
	groups, names := make([]string, len(resources)), make([]string, len(resources))
	for i, r := range resources {
		groups[i], names[i] = r.Group, r.Resource
	}
	args := pgx.NamedArgs{"health_groups": groups, "health_resources": names}
	sql := `SELECT c.api_group, c.resource, c.namespace, c.name, c.observed_at, c.op, c.object
		  FROM changes c
		 WHERE ` + f.counted(args) + `
		   AND (c.api_group, c.resource) IN (SELECT * FROM unnest(@health_groups::text[], @health_resources::text[]))
		 ORDER BY c.observed_at, c.id
		 LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return nil, false, s.fail("read the health series", err)
	}
	out, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (HealthVersion, error) {
		var (
			v  HealthVersion
			op string
		)
		err := cr.Scan(&v.Group, &v.Resource, &v.Namespace, &v.Name, &v.ObservedAt, &op, &v.Object)
		v.Op = change.Op(op)
		return v, err
	})
	if err != nil {
		return nil, false, s.fail("read the health series", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}
