-- The namespaces in which the cluster has changes rows of an object of the resource with that name.
SELECT DISTINCT namespace FROM changes
 WHERE cluster = @cluster AND api_group = @group AND resource = @resource AND name = @name
 ORDER BY 1
