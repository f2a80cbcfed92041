-- A session's outcome (its latest checkpoint's) and cost (its latest usage
-- entry's), kept in its row by a trigger on the entries as they are
-- stored, so that a page of sessions sorts by them with an index instead
-- of reading every session's entries. The *_seq columns are the entries
-- they come from: an entry stored out of order (a fork's copies) never
-- replaces a later one's value.

ALTER TABLE sessions
    ADD COLUMN outcome     text             NOT NULL DEFAULT '',
    ADD COLUMN outcome_seq bigint           NOT NULL DEFAULT 0,
    ADD COLUMN cost_usd    double precision NOT NULL DEFAULT 0,
    ADD COLUMN cost_seq    bigint           NOT NULL DEFAULT 0;

CREATE FUNCTION aerie_session_summary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind = 'checkpoint' THEN
        UPDATE sessions SET outcome = coalesce(NEW.payload->>'outcome', ''), outcome_seq = NEW.seq
        WHERE id = NEW.session_id AND outcome_seq < NEW.seq;
    ELSE
        UPDATE sessions SET cost_usd = coalesce((NEW.payload->>'cost_usd')::double precision, 0), cost_seq = NEW.seq
        WHERE id = NEW.session_id AND cost_seq < NEW.seq;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER entries_summary AFTER INSERT ON entries
    FOR EACH ROW WHEN (NEW.kind IN ('checkpoint', 'usage')) EXECUTE FUNCTION aerie_session_summary();

UPDATE sessions SET
    outcome = coalesce((SELECT payload->>'outcome' FROM entries
        WHERE session_id = sessions.id AND kind = 'checkpoint' ORDER BY seq DESC LIMIT 1), ''),
    outcome_seq = coalesce((SELECT max(seq) FROM entries WHERE session_id = sessions.id AND kind = 'checkpoint'), 0),
    cost_usd = coalesce((SELECT (payload->>'cost_usd')::double precision FROM entries
        WHERE session_id = sessions.id AND kind = 'usage' ORDER BY seq DESC LIMIT 1), 0),
    cost_seq = coalesce((SELECT max(seq) FROM entries WHERE session_id = sessions.id AND kind = 'usage'), 0);

CREATE INDEX sessions_tenant_outcome_id ON sessions (tenant, outcome, id);
CREATE INDEX sessions_tenant_cost_id ON sessions (tenant, cost_usd, id);
