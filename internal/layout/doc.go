// Package layout has no code: its test keeps the import rules that make the packages
// read the way data flows (source → change → pipeline → sinks), checked with
// `go list -deps` on every `make test`. See docs/architecture.md, "Layout".
package layout
