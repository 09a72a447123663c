package postgres

import "github.com/kube-cdc/kube-cdc/internal/pgdb"

// classify is pgdb.Classify: which errors are terminal, in one place, with the password
// scrubbed from every message.
func classify(err error, password string) error { return pgdb.Classify(err, password) }

// redact is pgdb.Redact.
func redact(err error, password string) error { return pgdb.Redact(err, password) }
