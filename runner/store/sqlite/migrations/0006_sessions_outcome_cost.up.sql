-- A session's outcome (its latest checkpoint's) and cost (its latest usage
-- entry's), kept in its row by triggers on the entries as they are stored,
-- so that a page of sessions sorts by them with an index instead of reading
-- every session's entries. The *_seq columns are the entries they come
-- from: an entry stored out of order (a fork's copies) never replaces a
-- later one's value.

ALTER TABLE sessions ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN outcome_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_seq INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER entries_outcome AFTER INSERT ON entries WHEN NEW.kind = 'checkpoint' BEGIN
    UPDATE sessions SET outcome = coalesce(json_extract(NEW.payload, '$.outcome'), ''), outcome_seq = NEW.seq
    WHERE id = NEW.session_id AND outcome_seq < NEW.seq;
END;

CREATE TRIGGER entries_cost AFTER INSERT ON entries WHEN NEW.kind = 'usage' BEGIN
    UPDATE sessions SET cost_usd = coalesce(json_extract(NEW.payload, '$.cost_usd'), 0), cost_seq = NEW.seq
    WHERE id = NEW.session_id AND cost_seq < NEW.seq;
END;

UPDATE sessions SET
    outcome = coalesce((SELECT json_extract(payload, '$.outcome') FROM entries
        WHERE session_id = sessions.id AND kind = 'checkpoint' ORDER BY seq DESC LIMIT 1), ''),
    outcome_seq = coalesce((SELECT max(seq) FROM entries WHERE session_id = sessions.id AND kind = 'checkpoint'), 0),
    cost_usd = coalesce((SELECT json_extract(payload, '$.cost_usd') FROM entries
        WHERE session_id = sessions.id AND kind = 'usage' ORDER BY seq DESC LIMIT 1), 0),
    cost_seq = coalesce((SELECT max(seq) FROM entries WHERE session_id = sessions.id AND kind = 'usage'), 0);

CREATE INDEX sessions_tenant_outcome_id ON sessions (tenant, outcome, id);
CREATE INDEX sessions_tenant_cost_id ON sessions (tenant, cost_usd, id);
