-- The guide's priority-pool example, with the weights its DDL writes.
-- Both pools may use the whole node; when both are active they divide it
-- 20 : 100, so olap gets 1/6 of the node and the_ceo 5/6
-- (1.667 and 8.333 vCPU of 10). The guide's prose says the_ceo has weight
-- 80 and quotes 20% / 80%, which would need RESOURCES_WEIGHT=80 here; see
-- docs/pools.md.

CREATE RESOURCE POOL olap WITH (
    CONCURRENT_QUERY_LIMIT=20,
    QUEUE_SIZE=100,
    DATABASE_LOAD_CPU_THRESHOLD=80,
    RESOURCES_WEIGHT=20,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE=80,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=100
);

CREATE RESOURCE POOL the_ceo WITH (
    CONCURRENT_QUERY_LIMIT=20,
    QUEUE_SIZE=100,
    RESOURCES_WEIGHT=100,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE=100,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=100
);
