-- Views for common kinds, so CMDB questions are plain SQL. Live objects only; every view
-- keeps cluster, namespace, name, uid and labels for joins and filters.

CREATE VIEW pods AS
SELECT cluster, namespace, name, uid,
       object #>> '{spec,nodeName}'            AS node,
       object #>> '{status,phase}'             AS phase,
       object #>> '{status,podIP}'             AS pod_ip,
       object #>> '{status,hostIP}'            AS host_ip,
       object #>> '{spec,serviceAccountName}'  AS service_account,
       ARRAY(SELECT c ->> 'image'
               FROM jsonb_array_elements(object #> '{spec,containers}') WITH ORDINALITY AS e(c, i)
              ORDER BY i)                      AS images,
       (SELECT coalesce(sum((s ->> 'restartCount')::int), 0)
          FROM jsonb_array_elements(object #> '{status,containerStatuses}') AS s)::int AS restarts,
       object #>> '{metadata,ownerReferences,0,kind}' AS owner_kind,
       object #>> '{metadata,ownerReferences,0,name}' AS owner_name,
       labels,
       (object #>> '{metadata,creationTimestamp}')::timestamptz AS creation_timestamp,
       resource_version, updated_at
  FROM objects
 WHERE api_group = '' AND resource = 'pods' AND deleted_at IS NULL;

CREATE VIEW deployments AS
SELECT cluster, namespace, name, uid,
       (object #>> '{spec,replicas}')::int                        AS replicas,
       coalesce((object #>> '{status,readyReplicas}')::int, 0)     AS ready_replicas,
       coalesce((object #>> '{status,updatedReplicas}')::int, 0)   AS updated_replicas,
       coalesce((object #>> '{status,availableReplicas}')::int, 0) AS available_replicas,
       ARRAY(SELECT c ->> 'image'
               FROM jsonb_array_elements(object #> '{spec,template,spec,containers}') WITH ORDINALITY AS e(c, i)
              ORDER BY i)                                           AS images,
       object #>> '{spec,strategy,type}'                            AS strategy,
       labels,
       (object #>> '{metadata,creationTimestamp}')::timestamptz    AS creation_timestamp,
       resource_version, updated_at
  FROM objects
 WHERE api_group = 'apps' AND resource = 'deployments' AND deleted_at IS NULL;

CREATE VIEW nodes AS
SELECT cluster, name, uid,
       object #>> '{status,nodeInfo,kubeletVersion}'          AS kubelet_version,
       (SELECT c ->> 'status' = 'True'
          FROM jsonb_array_elements(object #> '{status,conditions}') AS c
         WHERE c ->> 'type' = 'Ready' LIMIT 1)                AS ready,
       coalesce((object #>> '{spec,unschedulable}')::boolean, false) AS unschedulable,
       object #>> '{status,capacity,cpu}'                     AS cpu_capacity,
       object #>> '{status,capacity,memory}'                  AS memory_capacity,
       object #>> '{status,capacity,pods}'                    AS pods_capacity,
       object #>> '{status,allocatable,cpu}'                  AS cpu_allocatable,
       object #>> '{status,allocatable,memory}'               AS memory_allocatable,
       (SELECT a ->> 'address'
          FROM jsonb_array_elements(object #> '{status,addresses}') AS a
         WHERE a ->> 'type' = 'InternalIP' LIMIT 1)           AS internal_ip,
       object #>> '{status,nodeInfo,osImage}'                 AS os_image,
       object #>> '{status,nodeInfo,kernelVersion}'           AS kernel_version,
       object #>> '{status,nodeInfo,containerRuntimeVersion}' AS container_runtime,
       object #>> '{status,nodeInfo,architecture}'            AS architecture,
       labels,
       (object #>> '{metadata,creationTimestamp}')::timestamptz AS creation_timestamp,
       resource_version, updated_at
  FROM objects
 WHERE api_group = '' AND resource = 'nodes' AND deleted_at IS NULL;

CREATE VIEW services AS
SELECT cluster, namespace, name, uid,
       coalesce(object #>> '{spec,type}', 'ClusterIP') AS type,
       object #>> '{spec,clusterIP}'                   AS cluster_ip,
       -- "80/TCP" or "80:30080/TCP" (port:nodePort), in spec order
       ARRAY(SELECT (p ->> 'port')
                    || coalesce(':' || (p ->> 'nodePort'), '')
                    || '/' || coalesce(p ->> 'protocol', 'TCP')
               FROM jsonb_array_elements(object #> '{spec,ports}') WITH ORDINALITY AS e(p, i)
              ORDER BY i)                              AS ports,
       object #> '{spec,selector}'                     AS selector,
       ARRAY(SELECT coalesce(g ->> 'ip', g ->> 'hostname')
               FROM jsonb_array_elements(object #> '{status,loadBalancer,ingress}') WITH ORDINALITY AS e(g, i)
              ORDER BY i)                              AS external_addresses,
       labels,
       (object #>> '{metadata,creationTimestamp}')::timestamptz AS creation_timestamp,
       resource_version, updated_at
  FROM objects
 WHERE api_group = '' AND resource = 'services' AND deleted_at IS NULL;
