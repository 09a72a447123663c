package postgres

import "github.com/kube-cdc/kube-cdc/internal/sinks/postgres/schema"

// retentionChunk is schema.RetentionChunk under the name audit_test.go knows it by,
// until that test moves with the audit store (issue 30).
const retentionChunk = schema.RetentionChunk
