-- The guide's RESOURCES_WEIGHT example: four pools, each capped at 30% of
-- the node (3 vCPU of 10) and each query at 50% of its pool (1.5 vCPU).
-- All four active want 12 vCPU of 10, so equal weights give 2.5 vCPU each.
-- seed_weights_200.sql raises one weight to 200: that pool gets its cap,
-- 3 vCPU, and the other three share the remaining 7, 7/3 vCPU each.

CREATE RESOURCE POOL pool1 WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50, RESOURCES_WEIGHT = 100);
CREATE RESOURCE POOL pool2 WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50, RESOURCES_WEIGHT = 100);
CREATE RESOURCE POOL pool3 WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50, RESOURCES_WEIGHT = 100);
CREATE RESOURCE POOL pool4 WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50, RESOURCES_WEIGHT = 100);
