-- Sessions, their ordered entry streams and Mixture-of-Agents traces.
-- Every table carries the tenant so that every query can be scoped by it.
-- Ids are canonical UUID text; times are Unix microseconds.

CREATE TABLE sessions (
    id          TEXT    PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    dir         TEXT    NOT NULL DEFAULT '',
    provider    TEXT    NOT NULL DEFAULT '',
    model       TEXT    NOT NULL DEFAULT '',
    persona     TEXT    NOT NULL DEFAULT '',
    reasoning   TEXT    NOT NULL DEFAULT '',
    kind        TEXT    NOT NULL,
    label       TEXT    NOT NULL DEFAULT '',
    parent_id   TEXT    REFERENCES sessions (id),
    root_id     TEXT    NOT NULL REFERENCES sessions (id),
    state       TEXT    NOT NULL,
    entry_count INTEGER NOT NULL DEFAULT 0,
    last_seq    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deleted_at  INTEGER,
    -- The target of the entries' and traces' (session, tenant) foreign keys:
    -- a row can only be attached to a session of its own tenant.
    UNIQUE (id, tenant)
);

CREATE INDEX sessions_tenant ON sessions (tenant);
CREATE INDEX sessions_tenant_label ON sessions (tenant, label) WHERE label <> '';

CREATE TABLE entries (
    session_id   TEXT    NOT NULL,
    tenant       TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    -- The sequence number of the compaction checkpoint that replaced this
    -- entry in the live context; NULL while the entry is active.
    compacted_by INTEGER,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);

-- Load and Fork look up the latest entry of a few kinds. (The active tail
-- needs no index of its own: it is a range of the primary key, from the
-- latest compaction's first kept entry on.)
CREATE INDEX entries_kind ON entries (session_id, kind, seq);

CREATE TABLE moa_traces (
    id         TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    seq        INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    data       TEXT    NOT NULL,
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);

CREATE INDEX moa_traces_session ON moa_traces (session_id, created_at);
