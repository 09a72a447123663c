package postgres

import (
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// readerOf is the read store over s's database, schema and cluster, as `kube-cdc status`,
// history and as-of open it: the sink's tests read what it wrote through it.
func readerOf(t *testing.T, s *Sink) *store.Store {
	t.Helper()
	r, err := store.Open(testCtx(t), store.Options{DSN: s.opts.DSN, Schema: s.opts.Schema, Cluster: s.cluster, Sink: s.name,
		VerifySchema: VerifySchema, Ping: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}
