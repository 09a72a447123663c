// Package migrations holds kube-cdc's PostgreSQL schema as versioned SQL files, embedded
// in the binary (docs/contract.md, "PostgreSQL schema"). Files are applied in name order,
// each once, in its own transaction, with search_path set to the configured schema, so
// the SQL names no schema and a file's bytes are the same whatever the schema is called.
//
// A released migration never changes: released.sums lists, per released version, each
// migration it shipped and the SHA-256 of the file as shipped (make release-sums writes
// it), a test fails when an embedded file no longer matches it, and the PostgreSQL sink
// records each file's SHA-256 when it applies it and refuses, at start, a database whose
// applied migration differs from the binary's. Never edit an applied file: add the next
// number instead.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// FS holds the migration files: 001_init.sql, 002_….sql, …
//
//go:embed *.sql
var FS embed.FS

// File is one migration as the binary ships it.
type File struct {
	Name    string // "001_init.sql"
	Version string // "001_init": the key of its schema_migrations row
	SQL     string
	SHA256  string // hex SHA-256 of the file's bytes
}

// Files are the embedded migrations in the order they apply.
func Files() ([]File, error) { return ReadFiles(FS) }

// ReadFiles are the migrations (*.sql) of fsys in the order they apply.
func ReadFiles(fsys fs.FS) ([]File, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	files := make([]File, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		files = append(files, File{Name: n, Version: strings.TrimSuffix(n, ".sql"), SQL: string(b), SHA256: Checksum(b)})
	}
	return files, nil
}

// Checksum is the hex SHA-256 of a migration file's bytes.
func Checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Versions are the versions of every migration, in the order they apply ("001_init").
func Versions() []string {
	names, _ := fs.Glob(FS, "*.sql") // the pattern is valid: Glob cannot fail
	slices.Sort(names)
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".sql")
	}
	return names
}
