// Package asof prints what `kube-cdc as-of` shows: every object of a resource as a
// PostgreSQL sink had observed it at a moment (store.AsOf, the SQL function as_of
// of migration 013), as kubectl get would print it then: a table (PrintKind: NAMESPACE,
// NAME, the kind's columns from internal/read/columns with AGE at that moment,
// RESOURCEVERSION; Print: NAME, AGE, RESOURCEVERSION for any kind) or a List of the
// objects in YAML or JSON. It also reads the
// command's moment (ParseTime, through internal/moment, which the web UI shares): now, an RFC
// 3339 time, or a duration back from now.
//
// The package reads no database itself.
package asof
