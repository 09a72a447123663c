// Package migrations holds kube-cdc's PostgreSQL schema as versioned SQL files, embedded
// in the binary (docs/contract.md, "PostgreSQL schema"). Files are applied in name order,
// each once, in its own transaction, with search_path set to the configured schema, so
// the SQL names no schema. Never edit an applied file: add the next number instead.
package migrations

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// FS holds the migration files: 001_init.sql, 002_….sql, …
//
//go:embed *.sql
var FS embed.FS

// Versions are the versions of every migration, in the order they apply ("001_init").
func Versions() []string {
	names, _ := fs.Glob(FS, "*.sql") // the pattern is valid: Glob cannot fail
	slices.Sort(names)
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".sql")
	}
	return names
}
