-- Process limits: a pool whose queries may fork at most 64 tasks each,
-- 200 in all, beside one without a limit.
CREATE RESOURCE POOL batch WITH (CONCURRENT_QUERY_LIMIT=4, TOTAL_PIDS_LIMIT=200, QUERY_PIDS_LIMIT=64);
CREATE RESOURCE POOL web WITH (RESOURCES_WEIGHT=100);
