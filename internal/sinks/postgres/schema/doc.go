// Package schema owns kube-cdc's PostgreSQL schema: its migrations, the monthly
// partitions of changes, their retention and the statistics the write path's plans
// lean on. It is the only package that issues DDL (the SQL itself is in /migrations and
// in changes_partitions_ensure, migration 012); the sink writes rows, the readers read
// them.
//
// What it promises:
//
//   - Migrations (Migrate, MigrateBefore, MigrateConn): pending migrations apply in
//     version order, each in its own transaction with its schema_migrations row, which
//     records the file's checksum and the kube-cdc that applied it. Concurrent callers
//     are serialised by a session advisory lock per schema: the second finds nothing to
//     do. Nothing pending: no DDL at all, so a role without CREATE starts on a migrated
//     schema.
//   - A schema this binary must not write to is refused before anything changes, by
//     every caller (Migrate and Verify alike), in one terminal line: a migration it does
//     not know (ErrSchemaNewer: a newer kube-cdc migrated it) or one applied with another
//     checksum (ErrMigrationChanged: released migrations never change). Verify changes
//     nothing; a role that may not read schema_migrations gets ErrUnverifiable and the
//     caller decides.
//   - PartitionChanges partitions a large unpartitioned changes table online: every
//     step may run again, and exclusive locks are held for milliseconds.
//   - Upkeep, for a writer: the months of changes ahead exist (EnsurePartitions at
//     Start and every hour; a role that may not create them sees its rows go to
//     changes_default, no write fails); Retain removes the cluster's changes older than
//     its retention, dropping a month whole only when no other cluster still wants a
//     row of it (the retention table) and never holding changes' exclusive lock for
//     more than the catalog change; after bulk loads (Loaded), and for every partition
//     never analyzed, objects and changes are analyzed in the background, so a new
//     install's plans do not wait for autovacuum. None of it makes a write wait or fail.
//
// Errors are classified by dial (terminal or retryable) and never show the DSN's
// password.
package schema
