// Package history shows the recorded versions of one object, as `kube-cdc history` prints
// them: each version with a header (when it was observed, the op, its resourceVersion,
// who changed it) and what changed against the version before, as a unified diff of the
// YAML (yamlDiff) for people and as an RFC 6902 JSON Patch (JSONPatch) for
// scripts; applied in order to {}, the patches rebuild every version exactly. It also
// reads the command's arguments against what a sink records (MatchRecorded, ParseSince),
// so history needs no access to the cluster. The text (diffs and headers) shows every
// character that is invisible or reorders text as a marker, ⟨U+202E⟩ (Visible), and so
// does the web UI's object page, which shows the same diffs.
//
// The versions come from a PostgreSQL sink's changes table (postgres.Sink.History); the
// package reads no database itself.
package history
