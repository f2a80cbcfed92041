-- The built-in memory of sessions that run in pods, which keep no files:
-- one document per tenant, scope (the project: a git URL or a
-- spec.memory.scope name; empty for the tenant's user memory) and target
-- (MEMORY.md, USER.md). version counts the writes: a write names the
-- version it read and is refused when another came first, the store's
-- equivalent of the lock local memory files take. Not tied to a session:
-- memory outlives the sessions that wrote it.

CREATE TABLE memories (
    tenant     text        NOT NULL,
    scope      text        NOT NULL,
    target     text        NOT NULL,
    version    bigint      NOT NULL,
    updated_at timestamptz NOT NULL,
    data       bytea       NOT NULL,
    PRIMARY KEY (tenant, scope, target)
);
