-- The identity of the cluster a checkpoint was taken in (the kube-system namespace's
-- uid; '' when kube-cdc could not read it). A cluster rebuilt under the same `cluster`
-- name has another: its checkpoints mean nothing there, and every resource relists in a
-- new epoch even when the new cluster's resource versions have passed the old checkpoints.
ALTER TABLE checkpoints ADD COLUMN cluster_uid text NOT NULL DEFAULT '';
