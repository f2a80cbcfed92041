-- The full output of tool calls whose results reached the model shortened
-- (capped or compressed), byte-exact, by session and call id: the retrieve
-- tool reads them back, also in a later attempt of the session.

CREATE TABLE tool_outputs (
    session_id TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    call_id    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    data       BLOB    NOT NULL,
    PRIMARY KEY (session_id, call_id),
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);
