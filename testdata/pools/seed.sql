-- The YDB Workload Manager guide's first example, as a host pool file.
-- On a node of 10 vCPU the olap pool gets 10 × 70% = 7 vCPU
-- (cpu.max "700000 100000") and each of its queries 7 × 50% = 3.5 vCPU
-- (cpu.max "350000 100000").
--
-- The default pool is built in, with every parameter -1, as the guide shows:
--   CREATE RESOURCE POOL default WITH (CONCURRENT_QUERY_LIMIT=-1, QUEUE_SIZE=-1,
--     DATABASE_LOAD_CPU_THRESHOLD=-1, RESOURCES_WEIGHT=-1,
--     QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=-1, QUERY_CPU_LIMIT_PERCENT_PER_NODE=-1,
--     TOTAL_CPU_LIMIT_PERCENT_PER_NODE=-1)

CREATE RESOURCE POOL olap WITH (
    CONCURRENT_QUERY_LIMIT=10,
    QUEUE_SIZE=1000,
    DATABASE_LOAD_CPU_THRESHOLD=80,
    RESOURCES_WEIGHT=100,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE=50,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=70
);

/* Every user's queries go to olap (RANK becomes 1000). */
CREATE RESOURCE POOL CLASSIFIER olap_classifier
WITH (
    RESOURCE_POOL = 'olap',
    MEMBER_NAME = 'all-users@well-known'
);

-- Using olap needs SELECT ROW on the pool, as in YDB.
GRANT SELECT ROW ON `.metadata/workload_manager/pools/olap` TO `all-users@well-known`;

-- The guide's ACL examples: creating pools, and managing classifiers.
GRANT CREATE TABLE ON `.metadata/workload_manager/pools` TO user1;
GRANT ALL ON `/my_db` TO user1;
