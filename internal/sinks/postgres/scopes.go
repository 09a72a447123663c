package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/pgdb"
)

// Scopes (pipeline.ScopeKeeper): the scopes of res's group and resource with a
// checkpoint of this sink and cluster.
func (s *Sink) Scopes(ctx context.Context, res change.Resource) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sql.scopes, s.cluster, s.name, res.Group, res.Resource)
	if err != nil {
		return nil, fmt.Errorf("read the scopes of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the scopes of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	return scopes, nil
}

// ForgetScopes (pipeline.ScopeKeeper) deletes this sink's checkpoints of res's group and
// resource whose scope is not in keep: scopes no longer configured, whose rows a relist
// of the resource has tombstoned. Without it they would stay in checkpoints (and in
// `status`) forever, and a scope configured again later would resume from a checkpoint
// whose changes it never wrote.
func (s *Sink) ForgetScopes(ctx context.Context, res change.Resource, keep []string) error {
	if keep == nil {
		keep = []string{}
	}
	tag, err := s.pool.Exec(ctx, s.sql.forgetScopes, s.cluster, s.name, res.Group, res.Resource, keep)
	if err != nil {
		return fmt.Errorf("forget stale scopes of %s: %w", res.ID(), pgdb.Classify(err, s.password))
	}
	if n := tag.RowsAffected(); n > 0 {
		s.log.Info("forgot the checkpoints of scopes no longer configured", "sink", s.name, "resource", res.ID(), "scopes", n)
	}
	return nil
}
