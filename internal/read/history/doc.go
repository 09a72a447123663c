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
// Its contract: the versions come from the read store (store.History: object_versions(),
// the rows history() returns too), and the package reads no database itself; Show decodes
// each version once, and makes each diff line classed as it is made (DiffLine), so the
// web UI highlights a diff without parsing its text; the text is difflib's unified diff,
// line for line.
package history
