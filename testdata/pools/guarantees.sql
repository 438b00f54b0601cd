-- Memory guarantees: the working set of olap is protected from reclaim
-- by the others' (memory.low), 10% of it in every case (memory.min).
CREATE RESOURCE POOL olap WITH (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=60, TOTAL_MEMORY_LOW_PERCENT_PER_NODE=40, TOTAL_MEMORY_MIN_PERCENT_PER_NODE=10);
CREATE RESOURCE POOL etl WITH (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=20);
