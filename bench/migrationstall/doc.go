// Package migrationstall measures what each migration added since the previous release
// costs a running kube-cdc: `make bench` runs BenchmarkMigrationsAfterTheReleasedSet.
//
// It fills a real PostgreSQL (internal/testenv) with 10M changes rows at the schema the
// last released migration found (generate_series in SQL, the secondary indexes built
// after the load), then applies, one at a time and in order, the last released migration
// (017 at 0.1.0: the calibration row, a migration whose cost is known) and every
// migration that migrations/released.sums does not list yet, while a writer commits what
// the sink commits for a change (a changes row, the objects upsert, the checkpoint) every
// 10 ms. For each it prints the migration's wall time and the writer's longest commit
// overlapping it: how long writers were blocked. The rule (RELEASING.md, "Migrations that
// rewrite"): every blocking step under 1 s at 10M rows, or the work runs in the
// background with progress. Two reference rows check the instrument: an ACCESS EXCLUSIVE
// lock held 1.5 s must read as a ~1.5 s stall, and a plain CREATE INDEX on changes shows
// what a blocking rewrite costs at this size.
//
// KUBE_CDC_MIGRATION_BENCH_ROWS sets another row count (for a quick look; the rule is
// stated at 10M). The benchmark reports figures; it fails only when the instrument does
// not measure (the lock reads as no stall) or a migration fails.
package migrationstall
