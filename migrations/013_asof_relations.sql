-- The cluster as it was at a moment (as_of), and the relations between live objects that a
-- CMDB joins (owners, pod_placement, pod_storage, service_backends, ingress_routes,
-- lineage). README.md, "As of a moment" and "Relations"; docs/contract.md, "As of and
-- relations". Nothing here writes: an existing database gains three indexes, five views
-- and two functions.

-- as_of reads, per key, the newest changes row observed at or before a moment: one
-- descent of this index per key. observed_at leads after the key so that, once changes is
-- partitioned by month on observed_at, each key's scan reads the newest partition at or
-- before the moment first (an ordered append) and the later ones are pruned. Building it
-- takes a SHARE lock on changes (writes wait) for as long as the build lasts; IF NOT
-- EXISTS lets an operator build it beforehand without that lock (CONCURRENTLY):
-- docs/operations.md, "Upgrading to migration 013".
CREATE INDEX IF NOT EXISTS changes_key_observed ON changes (cluster, api_group, resource, namespace, name, observed_at, id);

-- owners and lineage find an owner by the uid its ownerReferences name.
CREATE INDEX objects_live_uid ON objects (cluster, uid) WHERE deleted_at IS NULL;

-- service_backends finds a Service's EndpointSlices by their kubernetes.io/service-name label.
CREATE INDEX objects_endpointslice_service ON objects (cluster, namespace, (labels ->> 'kubernetes.io/service-name'))
    WHERE api_group = 'discovery.k8s.io' AND resource = 'endpointslices' AND deleted_at IS NULL;

-- as_of(at, resource [, namespace [, cluster]]): every object of the resource as the sink
-- had observed it at the moment at, one row per object alive then, ordered by cluster,
-- namespace and name. resource is spelled as in history(): 'pods', 'deployments.apps',
-- 'widgets.example.com'; namespace NULL (the default) reads every namespace ('' is the
-- cluster-scoped objects' namespace); cluster NULL (the default) reads every cluster with
-- a checkpoint (one whose checkpoints were deleted is read only when named).
--
-- "As observed" (docs/contract.md, "As of a moment"): at is compared with
-- changes.observed_at, the time kube-cdc received the change, never with a time the
-- apiserver reports. Per key, the version at `at` is the row with the greatest
-- (observed_at, id) among those observed at or before it: the observation order (a key's
-- changes are received and written in order, so id and observed_at rise together, and id
-- orders the rows received at the same instant, e.g. an inferred delete of a recreated
-- object's old uid before its new uid's create). Never by resource_version: after an etcd
-- restore the RVs are issued again (epochs, migration 006), and a snapshot that revives a
-- row an inferred delete tombstoned carries a lower RV than that delete. The key is alive
-- when that row is no delete (observed or inferred); snapshot rows (a relist, resnapshot
-- --full, a drift repair) are versions like any other. So a change made while kube-cdc was
-- down shows from the relist that found it, and a delete it did not see from the relist
-- that inferred it.
--
-- Keys are read from objects (soft-deleted rows included), so with postgres.hardDelete an
-- object deleted since is missing. A key whose changes rows retention deleted, all of them,
-- is read from objects when its row was last written at or before at (it has not changed
-- since, so that is its version then); change_id is NULL for such a row.
CREATE FUNCTION as_of(at timestamptz, resource text, namespace text DEFAULT NULL, cluster text DEFAULT NULL)
RETURNS TABLE (cluster text, namespace text, name text, uid text, rv bigint, epoch int, change_id bigint,
               observed_at timestamptz, op text, snapshot boolean, object jsonb)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
-- Its plan (every partition of changes) is estimated above jit_above_cost at 10M rows,
-- and compiling it cost ~100 ms of a 220 ms call: JIT never pays for an index probe per key.
SET jit = off
AS $$
WITH target AS (
    -- $2 is 'plural' or 'plural.group': the group is what follows the first dot.
    SELECT split_part($2, '.', 1) AS resource,
           CASE WHEN strpos($2, '.') > 0 THEN substr($2, strpos($2, '.') + 1) ELSE '' END AS api_group,
           -- An = ANY on the leading column of the indexes, as history() does. Every cluster
           -- that wrote objects has a checkpoint.
           CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k) ELSE ARRAY[$4] END AS clusters
), keys AS (
    -- Two branches, one of which a one-time filter switches off, so each uses the primary
    -- key as far as it can (an "$3 IS NULL OR namespace = $3" would not).
    SELECT o.cluster, o.api_group, o.resource, o.namespace, o.name, o.uid, o.resource_version, o.epoch,
           o.object, o.updated_at, o.deleted_at
      FROM target t JOIN objects o ON o.cluster = ANY (t.clusters) AND o.api_group = t.api_group AND o.resource = t.resource
     WHERE $3 IS NULL
    UNION ALL
    SELECT o.cluster, o.api_group, o.resource, o.namespace, o.name, o.uid, o.resource_version, o.epoch,
           o.object, o.updated_at, o.deleted_at
      FROM target t JOIN objects o ON o.cluster = ANY (t.clusters) AND o.api_group = t.api_group AND o.resource = t.resource
     WHERE $3 IS NOT NULL AND o.namespace = $3
)
SELECT k.cluster, k.namespace, k.name,
       coalesce(v.uid, k.uid), coalesce(v.resource_version, k.resource_version), coalesce(v.epoch, k.epoch),
       v.id, coalesce(v.observed_at, k.updated_at), coalesce(v.op, 'update'), coalesce(v.snapshot, false),
       coalesce(v.object, k.object)
  FROM keys k
  LEFT JOIN LATERAL (
        SELECT c.id, c.uid, c.resource_version, c.epoch, c.observed_at, c.op, c.snapshot, c.object
          FROM changes c
         WHERE c.cluster = k.cluster AND c.api_group = k.api_group AND c.resource = k.resource
           AND c.namespace = k.namespace AND c.name = k.name AND c.observed_at <= $1
         ORDER BY c.observed_at DESC, c.id DESC
         LIMIT 1) v ON true
 WHERE CASE WHEN v.id IS NOT NULL THEN v.op <> 'delete'
            -- No changes row at or before at: the objects row, if it has not changed since
            -- and no key's row has ever been written after at (retention took them all).
            ELSE k.deleted_at IS NULL AND k.object IS NOT NULL AND k.updated_at <= $1
                 AND NOT EXISTS (SELECT 1 FROM changes c
                                  WHERE c.cluster = k.cluster AND c.api_group = k.api_group AND c.resource = k.resource
                                    AND c.namespace = k.namespace AND c.name = k.name)
       END
 ORDER BY k.cluster, k.namespace, k.name
$$;

-- Relations between live objects (deleted_at IS NULL), for CMDB joins. Each names both
-- ends by cluster, namespace, name and uid; an end kube-cdc does not stream (or that is
-- gone) has NULL uid. Resources are the objects table's (api_group, resource).

-- owners: one row per entry of a live object's metadata.ownerReferences: the child, then
-- the owner as the reference names it (apiVersion's group, kind, name, uid, controller),
-- resolved to the owner's live objects row by uid (same cluster, the child's namespace or
-- cluster-scoped, same group and kind): owner_resource and owner_namespace are NULL when
-- kube-cdc does not stream the owner's resource or the owner is gone. CRDs work the same.
CREATE VIEW owners AS
SELECT o.cluster, o.api_group, o.resource, o.kind, o.namespace, o.name, o.uid,
       ref.api_group                                     AS owner_api_group,
       ref.r ->> 'apiVersion'                            AS owner_api_version,
       ref.r ->> 'kind'                                  AS owner_kind,
       p.resource                                        AS owner_resource,
       p.namespace                                       AS owner_namespace,
       ref.r ->> 'name'                                  AS owner_name,
       ref.r ->> 'uid'                                   AS owner_uid,
       coalesce((ref.r ->> 'controller')::boolean, false)         AS controller,
       coalesce((ref.r ->> 'blockOwnerDeletion')::boolean, false) AS block_owner_deletion
  FROM objects o
 CROSS JOIN LATERAL (
       SELECT r, CASE WHEN strpos(r ->> 'apiVersion', '/') > 0 THEN split_part(r ->> 'apiVersion', '/', 1) ELSE '' END
         FROM jsonb_array_elements(o.object #> '{metadata,ownerReferences}') AS e(r)) AS ref(r, api_group)
  LEFT JOIN objects p ON p.cluster = o.cluster AND p.uid = ref.r ->> 'uid' AND p.deleted_at IS NULL
                     AND p.namespace IN (o.namespace, '') AND p.api_group = ref.api_group AND p.kind = ref.r ->> 'kind'
 WHERE o.deleted_at IS NULL AND jsonb_typeof(o.object #> '{metadata,ownerReferences}') = 'array';

-- pod_placement: every live pod and the node it is bound to (spec.nodeName; NULL while
-- unscheduled), with the node's uid when kube-cdc streams nodes.
CREATE VIEW pod_placement AS
SELECT p.cluster, p.namespace, p.name AS pod, p.uid AS pod_uid,
       p.object #>> '{spec,nodeName}' AS node, n.uid AS node_uid,
       p.object #>> '{status,phase}'  AS phase,
       p.object #>> '{status,podIP}'  AS pod_ip,
       p.object #>> '{status,hostIP}' AS host_ip
  FROM objects p
  LEFT JOIN objects n ON n.cluster = p.cluster AND n.api_group = '' AND n.resource = 'nodes' AND n.namespace = ''
                     AND n.name = p.object #>> '{spec,nodeName}' AND n.deleted_at IS NULL
 WHERE p.api_group = '' AND p.resource = 'pods' AND p.deleted_at IS NULL;

-- pod_storage: one row per live pod's volume backed by a PersistentVolumeClaim
-- (spec.volumes[].persistentVolumeClaim, or a generic ephemeral volume, whose claim is
-- named <pod>-<volume>): the claim in the pod's namespace, the PersistentVolume bound to
-- it (the claim's spec.volumeName), and the StorageClass (the volume's
-- spec.storageClassName, else the claim's).
CREATE VIEW pod_storage AS
SELECT p.cluster, p.namespace, p.name AS pod, p.uid AS pod_uid,
       v.vol ->> 'name'                                  AS volume,
       v.claim,
       v.vol ? 'ephemeral'                               AS ephemeral,
       (v.vol #>> '{persistentVolumeClaim,readOnly}')::boolean IS TRUE AS read_only,
       c.uid                                             AS claim_uid,
       c.object #>> '{status,phase}'                     AS claim_phase,
       c.object #>> '{spec,volumeName}'                  AS persistent_volume,
       pv.uid                                            AS persistent_volume_uid,
       coalesce(pv.object #>> '{spec,storageClassName}', c.object #>> '{spec,storageClassName}') AS storage_class,
       sc.uid                                            AS storage_class_uid,
       sc.object ->> 'provisioner'                       AS provisioner
  FROM objects p
 CROSS JOIN LATERAL (
       SELECT vol, coalesce(vol #>> '{persistentVolumeClaim,claimName}', p.name || '-' || (vol ->> 'name'))
         FROM jsonb_array_elements(p.object #> '{spec,volumes}') AS e(vol)
        WHERE vol ? 'persistentVolumeClaim' OR vol ? 'ephemeral') AS v(vol, claim)
  LEFT JOIN objects c ON c.cluster = p.cluster AND c.api_group = '' AND c.resource = 'persistentvolumeclaims'
                     AND c.namespace = p.namespace AND c.name = v.claim AND c.deleted_at IS NULL
  LEFT JOIN objects pv ON pv.cluster = p.cluster AND pv.api_group = '' AND pv.resource = 'persistentvolumes'
                      AND pv.namespace = '' AND pv.name = c.object #>> '{spec,volumeName}' AND pv.deleted_at IS NULL
  LEFT JOIN objects sc ON sc.cluster = p.cluster AND sc.api_group = 'storage.k8s.io' AND sc.resource = 'storageclasses'
                      AND sc.namespace = ''
                      AND sc.name = coalesce(pv.object #>> '{spec,storageClassName}', c.object #>> '{spec,storageClassName}')
                      AND sc.deleted_at IS NULL
 WHERE p.api_group = '' AND p.resource = 'pods' AND p.deleted_at IS NULL
   AND jsonb_typeof(p.object #> '{spec,volumes}') = 'array';

-- service_backends: one row per endpoint of a live Service's EndpointSlices (those
-- labelled kubernetes.io/service-name=<service> in its namespace), with the pod its
-- targetRef names, resolved to the live pod of that name and uid (pod_uid NULL when the
-- pod is gone or the endpoint targets something else). A Service with no EndpointSlice, or
-- a slice with no endpoint, has one row with NULLs past what exists. ready is the
-- endpoint's conditions.ready, true when unset (as the API says to read it).
CREATE VIEW service_backends AS
SELECT s.cluster, s.namespace, s.name AS service, s.uid AS service_uid,
       e.name AS endpointslice, e.uid AS endpointslice_uid,
       e.object ->> 'addressType'                        AS address_type,
       ep.ep #>> '{addresses,0}'                         AS address,
       CASE WHEN ep.ep IS NOT NULL THEN coalesce((ep.ep #>> '{conditions,ready}')::boolean, true) END AS ready,
       ep.ep ->> 'nodeName'                              AS node,
       ep.ep #>> '{targetRef,kind}'                      AS target_kind,
       ep.ep #>> '{targetRef,name}'                      AS target_name,
       p.name                                            AS pod,
       p.uid                                             AS pod_uid
  FROM objects s
  LEFT JOIN objects e ON e.cluster = s.cluster AND e.api_group = 'discovery.k8s.io' AND e.resource = 'endpointslices'
                     AND e.namespace = s.namespace AND e.labels ->> 'kubernetes.io/service-name' = s.name
                     AND e.deleted_at IS NULL
  LEFT JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(e.object -> 'endpoints') = 'array'
                                              THEN e.object -> 'endpoints' END) AS ep(ep) ON true
  LEFT JOIN objects p ON p.cluster = s.cluster AND p.api_group = '' AND p.resource = 'pods'
                     AND ep.ep #>> '{targetRef,kind}' = 'Pod'
                     AND p.namespace = coalesce(ep.ep #>> '{targetRef,namespace}', s.namespace)
                     AND p.name = ep.ep #>> '{targetRef,name}' AND p.uid = ep.ep #>> '{targetRef,uid}'
                     AND p.deleted_at IS NULL
 WHERE s.api_group = '' AND s.resource = 'services' AND s.deleted_at IS NULL;

-- ingress_routes: one row per path of a live Ingress's rules (host, path, pathType) and one
-- for its spec.defaultBackend (default_backend true, host and path NULL), with the backend
-- Service (name and port, the number or the port's name) resolved to the live Service in
-- the Ingress's namespace. A resource backend (not a Service) has service NULL.
CREATE VIEW ingress_routes AS
SELECT i.cluster, i.namespace, i.name AS ingress, i.uid AS ingress_uid,
       coalesce(i.object #>> '{spec,ingressClassName}',
                i.object #>> '{metadata,annotations,kubernetes.io/ingress.class}') AS ingress_class,
       r.host, r.path, r.path_type, r.default_backend,
       r.backend #>> '{service,name}'                    AS service,
       coalesce(r.backend #>> '{service,port,number}', r.backend #>> '{service,port,name}') AS service_port,
       s.uid                                             AS service_uid
  FROM objects i
 CROSS JOIN LATERAL (
       SELECT rule ->> 'host', p ->> 'path', p ->> 'pathType', false, p -> 'backend'
         FROM jsonb_array_elements(CASE WHEN jsonb_typeof(i.object #> '{spec,rules}') = 'array'
                                        THEN i.object #> '{spec,rules}' ELSE '[]' END) AS rl(rule)
        CROSS JOIN jsonb_array_elements(CASE WHEN jsonb_typeof(rule #> '{http,paths}') = 'array'
                                             THEN rule #> '{http,paths}' ELSE '[]' END) AS ps(p)
       UNION ALL
       SELECT NULL, NULL, NULL, true, i.object #> '{spec,defaultBackend}'
        WHERE jsonb_typeof(i.object #> '{spec,defaultBackend}') = 'object'
       ) AS r(host, path, path_type, default_backend, backend)
  LEFT JOIN objects s ON s.cluster = i.cluster AND s.api_group = '' AND s.resource = 'services'
                     AND s.namespace = i.namespace AND s.name = r.backend #>> '{service,name}' AND s.deleted_at IS NULL
 WHERE i.api_group = 'networking.k8s.io' AND i.resource = 'ingresses' AND i.deleted_at IS NULL;

-- lineage(resource, namespace, name [, cluster]): the live object, then its controller
-- (the ownerReference with controller: true), its controller's controller, and so on to
-- the top: Pod → ReplicaSet → Deployment, Job → CronJob, a custom resource's chain alike.
-- depth 0 is the object. Owners that are not controllers (controller false or unset) are
-- not followed: owners lists them. An owner kube-cdc does not stream, or that is gone, ends
-- the chain with found false, resource and namespace NULL, and the reference's kind, name
-- and uid. resource is spelled as in history(); cluster NULL reads every cluster with a
-- checkpoint, as as_of does. At most
-- 32 steps (ownerReferences may form a cycle).
CREATE FUNCTION lineage(resource text, namespace text, name text, cluster text DEFAULT NULL)
RETURNS TABLE (depth int, cluster text, api_group text, resource text, kind text, namespace text, name text,
               uid text, found boolean)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$
WITH RECURSIVE chain AS (
    SELECT 0 AS depth, o.cluster, o.api_group, o.resource, o.kind, o.namespace, o.name, o.uid, o.object, true AS found
      FROM objects o
     WHERE o.resource = split_part($1, '.', 1)
       AND o.api_group = CASE WHEN strpos($1, '.') > 0 THEN substr($1, strpos($1, '.') + 1) ELSE '' END
       AND o.namespace = $2 AND o.name = $3 AND o.deleted_at IS NULL
       AND o.cluster = ANY (CASE WHEN $4 IS NULL THEN ARRAY(SELECT DISTINCT k.cluster FROM checkpoints k)
                                 ELSE ARRAY[$4] END)
  UNION ALL
    SELECT c.depth + 1, c.cluster,
           coalesce(p.api_group, CASE WHEN strpos(ref.r ->> 'apiVersion', '/') > 0
                                      THEN split_part(ref.r ->> 'apiVersion', '/', 1) ELSE '' END),
           p.resource, ref.r ->> 'kind', p.namespace, ref.r ->> 'name', ref.r ->> 'uid', p.object, p.uid IS NOT NULL
      FROM chain c
     CROSS JOIN LATERAL (SELECT r FROM jsonb_array_elements(c.object #> '{metadata,ownerReferences}') AS e(r)
                          WHERE (r ->> 'controller')::boolean
                          LIMIT 1) AS ref(r)
      LEFT JOIN objects p ON p.cluster = c.cluster AND p.uid = ref.r ->> 'uid' AND p.deleted_at IS NULL
                         AND p.namespace IN (c.namespace, '') AND p.kind = ref.r ->> 'kind'
     WHERE c.depth < 32 AND jsonb_typeof(c.object #> '{metadata,ownerReferences}') = 'array'
)
SELECT depth, cluster, api_group, resource, kind, namespace, name, uid, found
  FROM chain
 ORDER BY cluster, depth
$$;
