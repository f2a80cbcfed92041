-- The full output of tool calls whose results reached the model shortened
-- (capped or compressed), byte-exact, by session and call id: the retrieve
-- tool reads them back, also in a later attempt of the session. bytea, not
-- text: an output may hold NUL bytes or invalid UTF-8.

CREATE TABLE tool_outputs (
    session_id uuid        NOT NULL,
    tenant     text        NOT NULL,
    call_id    text        NOT NULL,
    created_at timestamptz NOT NULL,
    data       bytea       NOT NULL,
    PRIMARY KEY (session_id, call_id),
    FOREIGN KEY (session_id, tenant) REFERENCES sessions (id, tenant)
);
