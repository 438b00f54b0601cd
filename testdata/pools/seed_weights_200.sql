-- Applied after seed_weights.sql (or as a run-time change): pool4 now gets
-- its cap of 3 vCPU and pool1..pool3 share the other 7, 7/3 vCPU each.
ALTER RESOURCE POOL pool4 SET (RESOURCES_WEIGHT = 200);
