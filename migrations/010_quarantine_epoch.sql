-- The epoch of a quarantined change (see 006_epochs): after a time travel the cluster
-- issues its resource versions again, for other changes, so a version from an earlier
-- epoch and a later one may share an RV. Keyed by (epoch, resource_version) like changes,
-- a poison version of a later epoch is quarantined beside the earlier one instead of
-- being taken for its replay, and "a later version resolves it" compares (epoch, RV).
ALTER TABLE quarantine ADD COLUMN epoch int NOT NULL DEFAULT 0;
ALTER TABLE quarantine DROP CONSTRAINT quarantine_pkey;
ALTER TABLE quarantine ADD PRIMARY KEY (cluster, api_group, resource, namespace, name, epoch, resource_version, op);
