-- CPU sets (CPUS, poolagent's extension): web owns CPUs 0-3 and would be
-- given 6 of 8 vCPUs by its weight, but 4 CPUs are all it can use; the
-- rest goes to etl. batch runs on CPU 7 under a quarter of the node.

CREATE RESOURCE POOL web WITH (
    CPUS = '0-3',
    RESOURCES_WEIGHT = 300
);

CREATE RESOURCE POOL etl WITH (
    RESOURCES_WEIGHT = 100
);

CREATE RESOURCE POOL batch WITH (
    CPUS = '4-7',
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 25,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50
);
