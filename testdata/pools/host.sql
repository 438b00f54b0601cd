-- A host's pools in the shape SPEC §1 describes: a nightly batch job, ad hoc
-- analysts and a priority user, with poolagent's own extensions.

CREATE RESOURCE POOL batch WITH (
    CONCURRENT_QUERY_LIMIT = 2,
    QUEUE_SIZE = 10,
    RESOURCES_WEIGHT = 0,                     -- only what the others leave
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50,
    TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE = 40,
    CPU_PERIOD_USEC = 250000                  -- long period: fewer, longer slices
);

CREATE RESOURCE POOL adhoc WITH (
    CONCURRENT_QUERY_LIMIT = 20,
    QUEUE_SIZE = 100,
    DATABASE_LOAD_CPU_THRESHOLD = 80,
    QUERY_CANCEL_AFTER_SECONDS = 300,
    RESOURCE_WEIGHT = 100,                    -- YDB's other spelling
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 75,
    QUERY_CPU_LIMIT_PERCENT_PER_NODE = 25,
    QUERY_MEMORY_LIMIT_PERCENT_PER_NODE = 10,
    CPU_BURST_PERCENT = 20                    -- bursts of 20% of the quota carry over
);

CREATE RESOURCE POOL vip WITH (
    RESOURCES_WEIGHT = 400,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50,
    CPU_BURST_PERCENT = 100
);

-- The default pool may not change its admission, but its CPU share can.
ALTER RESOURCE POOL default SET (RESOURCES_WEIGHT = 50, TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 25);

CREATE RESOURCE POOL CLASSIFIER ceo WITH (RESOURCE_POOL = 'vip', MEMBER_NAME = 'carol', RANK = 100);
CREATE RESOURCE POOL CLASSIFIER nightly WITH (RESOURCE_POOL = 'batch', MEMBER_NAME = '%etl');
CREATE RESOURCE POOL CLASSIFIER analysts WITH (RESOURCE_POOL = 'adhoc', MEMBER_NAME = '%analysts');

GRANT USE ON RESOURCE POOL vip TO carol;
GRANT USE ON RESOURCE POOL batch TO '%etl';
GRANT SELECT ROW ON `.metadata/workload_manager/pools/adhoc` TO '%analysts', carol;
GRANT ALL ON `/host` TO '%wheel';
