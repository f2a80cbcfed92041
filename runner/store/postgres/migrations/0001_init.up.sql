-- Sessions, their ordered entry streams and Mixture-of-Agents traces.
-- Every table carries the tenant so that every query can be scoped by it.

CREATE TABLE sessions (
    id          uuid        PRIMARY KEY,
    tenant      text        NOT NULL,
    dir         text        NOT NULL DEFAULT '',
    provider    text        NOT NULL DEFAULT '',
    model       text        NOT NULL DEFAULT '',
    persona     text        NOT NULL DEFAULT '',
    reasoning   text        NOT NULL DEFAULT '',
    kind        text        NOT NULL,
    label       text        NOT NULL DEFAULT '',
    parent_id   uuid        REFERENCES sessions (id),
    root_id     uuid        NOT NULL REFERENCES sessions (id),
    state       text        NOT NULL,
    entry_count bigint      NOT NULL DEFAULT 0,
    last_seq    bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    deleted_at  timestamptz,
    -- The target of the entries' and traces' (session, tenant) foreign keys:
    -- a row can only be attached to a session of its own tenant.
    UNIQUE (id, tenant)
) WITH (fillfactor = 70);

-- Every append updates its session's counters and updated_at. Leaving those
-- columns out of every index, with room on the page, keeps that update HOT:
-- no index is touched.
CREATE INDEX sessions_tenant ON sessions (tenant);
CREATE INDEX sessions_tenant_label ON sessions (tenant, label) WHERE label <> '';

CREATE TABLE entries (
    session_id   uuid        NOT NULL,
    tenant       text        NOT NULL,
    seq          bigint      NOT NULL,
    kind         text        NOT NULL,
    -- json, not jsonb: payloads are only ever decoded by the runner, json
    -- keeps them byte for byte, and it accepts \u0000, which tool output
    -- may contain and jsonb refuses.
    payload      json        NOT NULL,
    created_at   timestamptz NOT NULL,
    -- The sequence number of the compaction checkpoint that replaced this
    -- entry in the live context; NULL while the entry is active.
    compacted_by bigint,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);

-- Load and Fork look up the latest entry of a few kinds. (The active tail
-- needs no index of its own: it is a range of the primary key, from the
-- latest compaction's first kept entry on.)
CREATE INDEX entries_kind ON entries (session_id, kind, seq);

CREATE TABLE moa_traces (
    id         uuid        PRIMARY KEY,
    session_id uuid        NOT NULL,
    tenant     text        NOT NULL,
    seq        bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    data       json        NOT NULL,
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);

CREATE INDEX moa_traces_session ON moa_traces (session_id, created_at);
