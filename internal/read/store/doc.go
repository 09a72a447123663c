// Package store owns every read of a PostgreSQL sink's schema: an object's versions with
// the object each changed and who made it (History), the objects as of a moment (AsOf),
// the web UI's feed, chart counts and an object's relations (Feed, Counts,
// Owners, Children), its lanes, an object's Kubernetes Events and the versions the
// chart's health series reads (Lanes, Events, HealthVersions), what changed before an
// object broke (Why, with each change's objects for a diff when asked), and what
// `kube-cdc status` shows of the sink (Status,
// QuarantinedChanges, Writers). The CLI's history, as-of and status, the web UI and the
// benchmarks read through it; none of them imports the sink.
//
// Its contract:
//
//   - It never writes. Its sessions are read only (default_transaction_read_only), so a
//     role with USAGE on the schema and SELECT on its tables is enough, and a statement
//     that would write fails loudly. It applies no migration; Open with Ping refuses a
//     schema a newer kube-cdc migrated (the schema owner's check, handed in as
//     Options.VerifySchema so that the read side imports no sink) and one without
//     kube-cdc's tables, naming the way out.
//   - Each query is defined once, in SQL: a function or view of the migrations
//     (object_versions, which history() reads too; as_of; owners; change_actors) or an
//     embedded file of sql/, with named arguments (pgx.NamedArgs) and the schema first on
//     search_path, never a Go string in a caller. The one exception is the feed and its
//     chart (and the chart's health versions), whose conditions are the filters a page
//     sets (feed.go says why).
//   - The feed reads through indexes; a condition none serves (a name substring, prefix
//     or regex; a user) is checked on at most Filter.Window changes a page, and the page
//     says where the search stopped (FeedPage.Stopped), so a page's cost does not grow
//     with the table or the rarity of a match.
//   - Statements are planned generically and without JIT, once per connection: at 10M
//     rows a custom plan or a JIT compile cost more than running them
//     (docs/benchmarks.md, "History at scale").
//   - Errors name the read that failed; wrong credentials, a missing privilege, database
//     or table are retry.Terminal (pgdb.Classify), and no error holds the password.
//
// A read names its cluster (HistoryQuery.Cluster, Filter.Cluster, ...) or reads the
// store's (Options.Cluster).
package store
