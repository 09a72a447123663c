package auditstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres/pgtext"
)

// Store keeps the audit events in the schema's audit_events table (see the package doc).
type Store struct {
	pool     *pgxpool.Pool
	schema   string // sanitized
	cluster  string
	classify func(error) error
	reader   string // whose audit log positions (ForReader)
}

// Options say where a Store keeps the events.
type Options struct {
	Schema  string // the schema kube-cdc migrated (unquoted: "kube_cdc")
	Cluster string // the cluster the events are stored and counted as
	// Classify turns a driver error into the error returned (the PostgreSQL sink's
	// classification: terminal or retryable, the password scrubbed); nil: unchanged.
	Classify func(error) error
}

// New is a Store on pool, a pool to a database whose schema is migrated (the caller
// migrated it or verified it). Close closes pool.
func New(pool *pgxpool.Pool, o Options) *Store {
	c := o.Classify
	if c == nil {
		c = func(err error) error { return err }
	}
	return &Store{pool: pool, schema: pgx.Identifier{o.Schema}.Sanitize(), cluster: o.Cluster, classify: c}
}

// ForReader is the store as the reader of audit log files named reader (a replica's
// identity: the files are on its host) keeps their positions.
func (s *Store) ForReader(reader string) *Store {
	c := *s
	c.reader = reader
	return &c
}

// Position returns how far the reader has stored the audit log file at path.
func (s *Store) Position(ctx context.Context, path string) (audit.Position, error) {
	var p audit.Position
	var ino, off int64
	err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT inode, "offset" FROM %s.audit_log_positions
		WHERE cluster = $1 AND reader = $2 AND path = $3`, s.schema), s.cluster, s.reader, path).Scan(&ino, &off)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the audit log position: %w", s.classify(err))
	}
	return audit.Position{Inode: uint64(ino), Offset: off}, nil
}

// StoreAt stores events and the position of the audit log file they were read up to, in
// one transaction.
func (s *Store) StoreAt(ctx context.Context, events []audit.Event, path string, pos audit.Position) error {
	return s.store(ctx, events, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.audit_log_positions (cluster, reader, path, inode, "offset")
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (cluster, reader, path) DO UPDATE SET inode = excluded.inode, "offset" = excluded."offset", updated_at = now()`,
			s.schema), s.cluster, s.reader, path, int64(pos.Inode), pos.Offset)
		return err
	})
}

// Close closes the connections.
func (s *Store) Close() { s.pool.Close() }

// Store makes events durable, all or none, in one transaction; an event stored before
// (its audit ID) is left as it is.
func (s *Store) Store(ctx context.Context, events []audit.Event) error {
	if len(events) == 0 {
		return nil
	}
	return s.store(ctx, events, nil)
}

// store inserts events and runs also, in one transaction.
func (s *Store) store(ctx context.Context, events []audit.Event, also func(context.Context, pgx.Tx) error) error {
	q := fmt.Sprintf(`INSERT INTO %s.audit_events (audit_id, cluster, verb, api_group, resource, subresource, namespace,
		name, object_uid, response_rv, response_uid, deleted_uids, username, user_uid, groups, impersonator, user_agent,
		source_ips, code, request_at, stage_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
		ON CONFLICT (audit_id) DO NOTHING`, s.schema)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, e := range events {
			var rv *int64
			if e.ResponseRV > 0 {
				v := int64(e.ResponseRV)
				rv = &v
			}
			var impersonator *string
			if e.Impersonator != "" {
				v := pgtext.Valid(e.Impersonator)
				impersonator = &v
			}
			// What authenticators and clients say (an OIDC claim, a user agent) may hold a NUL
			// byte or invalid UTF-8, which text cannot store: one such event would fail its
			// whole batch, again at every re-send, until the apiserver dropped it.
			b.Queue(q, pgtext.Valid(e.AuditID), s.cluster, pgtext.Valid(e.Verb), pgtext.Valid(e.Group), pgtext.Valid(e.Resource),
				pgtext.Valid(e.Subresource), pgtext.Valid(e.Namespace), pgtext.Valid(e.Name), pgtext.Valid(e.ObjectUID), rv, pgtext.Valid(e.ResponseUID),
				pgtext.ValidAll(e.DeletedUIDs), pgtext.Valid(e.Username), pgtext.Valid(e.UserUID), pgtext.ValidAll(e.Groups), impersonator,
				pgtext.Valid(e.UserAgent), pgtext.ValidAll(e.SourceIPs), e.Code, e.RequestReceived, e.StageTimestamp)
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, &b).Close(); err != nil {
				return err
			}
		}
		if also != nil {
			return also(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store %d audit events: %w", len(events), s.classify(err))
	}
	return nil
}

// JoinStats counts the window since since, for the store's cluster.
func (s *Store) JoinStats(ctx context.Context, since time.Time) (audit.JoinStats, error) {
	var st audit.JoinStats
	var last *time.Time
	err := s.pool.QueryRow(ctx, fmt.Sprintf(`
		SELECT (SELECT count(*) FROM %[1]s.audit_events WHERE cluster = $1 AND received_at >= $2),
		       (SELECT max(received_at) FROM %[1]s.audit_events WHERE cluster = $1),
		       count(*), count(*) FILTER (WHERE a.match = 'exact'), count(*) FILTER (WHERE a.match = 'nearest'),
		       count(*) FILTER (WHERE a.match IS NULL),
		       (SELECT count(*) FROM %[1]s.audit_events e
		         WHERE e.cluster = $1 AND e.received_at >= $2
		           AND NOT EXISTS (SELECT 1 FROM %[1]s.changes c JOIN %[1]s.change_actors x ON x.change_id = c.id
		                            WHERE c.cluster = e.cluster AND c.api_group = e.api_group AND c.resource = e.resource
		                              AND c.namespace = e.namespace AND (c.name = e.name OR e.name = '')
		                              AND x.audit_id = e.audit_id))
		  FROM %[1]s.changes c
		  LEFT JOIN %[1]s.change_actors a ON a.change_id = c.id
		 WHERE c.cluster = $1 AND c.observed_at >= $2 AND NOT c.snapshot AND NOT c.inferred`, s.schema),
		s.cluster, since).Scan(&st.Events, &last, &st.Changes, &st.Exact, &st.Nearest, &st.UnmatchedChanges, &st.UnmatchedEvents)
	if err != nil {
		return st, fmt.Errorf("count the actor join: %w", s.classify(err))
	}
	if last != nil {
		st.LastReceived = *last
	}
	return st, nil
}

// ExactActors returns the actors of b's changes that audit events name exactly, one
// entry per change, nil where none is stored yet: the SQL function exact_actor (migration
// 018), the exact branch of the view change_actors, so a Kafka or stdout record and the
// database name the same actor. For the sinks that write the actor as they write a change;
// the view also joins nearest.
func (s *Store) ExactActors(ctx context.Context, b change.Batch) ([]*change.Actor, error) {
	n := len(b.Changes)
	ns, names, uids, ops := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	rvs, epochs, inferred := make([]int64, n), make([]int32, n), make([]bool, n)
	for i, c := range b.Changes {
		ns[i], names[i], uids[i], ops[i] = c.Key.Namespace, c.Key.Name, c.UID, string(c.Op)
		rvs[i], epochs[i], inferred[i] = int64(c.RV), int32(c.Epoch), c.Inferred
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`
		SELECT k.i, e.username, coalesce(e.impersonator, ''), e.user_agent, e.audit_id, e.verb, e.subresource
		  FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::int[], $9::text[], $10::bool[])
		       WITH ORDINALITY AS k(namespace, name, uid, rv, epoch, op, inferred, i)
		 CROSS JOIN LATERAL %s.exact_actor($1, $2, $3, k.namespace, k.name, k.uid, k.rv, k.epoch, k.op, k.inferred) e`, s.schema),
		s.cluster, b.Resource.Group, b.Resource.Resource, ns, names, uids, rvs, epochs, ops, inferred)
	if err != nil {
		return nil, fmt.Errorf("read the actors: %w", s.classify(err))
	}
	out := make([]*change.Actor, n)
	for rows.Next() {
		var i int64
		a := &change.Actor{Match: change.MatchExact}
		if err := rows.Scan(&i, &a.Username, &a.Impersonator, &a.UserAgent, &a.AuditID, &a.Verb, &a.Subresource); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the actors: %w", s.classify(err))
		}
		out[i-1] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the actors: %w", s.classify(err))
	}
	return out, nil
}
