-- Whether the key has any changes row in the cluster (History's "no history" from "none since").
SELECT EXISTS (SELECT 1 FROM changes
                WHERE cluster = @cluster AND api_group = @group AND resource = @resource
                  AND namespace = @namespace AND name = @name)
