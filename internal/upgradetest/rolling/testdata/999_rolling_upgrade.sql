-- Test-only: the schema change of the "new" kube-cdc in internal/upgradetest/rolling. It
-- is added to the migrations package by `go build -overlay` for that test's binary alone;
-- no release ships it. It alters the two tables every batch writes, so it takes their
-- locks while the new leader starts, and it makes the schema one the old binary does not
-- know.
ALTER TABLE objects ADD COLUMN rolling_upgrade_note text;
ALTER TABLE changes ADD COLUMN rolling_upgrade_note text;
