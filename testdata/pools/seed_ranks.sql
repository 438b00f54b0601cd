-- The guide's conflicting classifiers: user1@domain matches both. Without
-- earlier classifiers olap1_classifier gets RANK 1000 and olap2_classifier
-- RANK 2000, so olap1 wins. The guide does not create olap1 and olap2, so
-- both classifiers are kept and skipped (with a warning) until they exist.

CREATE RESOURCE POOL CLASSIFIER olap1_classifier
WITH (
    RESOURCE_POOL = 'olap1',
    MEMBER_NAME = 'user1@domain'
);

CREATE RESOURCE POOL CLASSIFIER olap2_classifier
WITH (
    RESOURCE_POOL = 'olap2',
    MEMBER_NAME = 'user1@domain'
);
