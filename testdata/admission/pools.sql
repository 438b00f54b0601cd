-- Pools for trying `poolagent daemon` and `poolagent run` by hand (the
-- README's examples run on it): a small analytics pool that queues, and a
-- batch pool with a CPU-load threshold.

CREATE RESOURCE POOL olap WITH (
    CONCURRENT_QUERY_LIMIT = 2,
    QUEUE_SIZE = 3,
    QUERY_CANCEL_AFTER_SECONDS = 60,
    RESOURCES_WEIGHT = 100,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50
);

CREATE RESOURCE POOL batch WITH (
    CONCURRENT_QUERY_LIMIT = 10,
    QUEUE_SIZE = 100,
    DATABASE_LOAD_CPU_THRESHOLD = 80,
    RESOURCES_WEIGHT = 50
);

CREATE RESOURCE POOL CLASSIFIER everyone WITH (RESOURCE_POOL = 'olap', MEMBER_NAME = 'all-users@well-known');

GRANT USE ON RESOURCE POOL olap, batch TO 'all-users@well-known';
