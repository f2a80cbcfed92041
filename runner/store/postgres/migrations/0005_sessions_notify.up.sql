-- Every change of a session row (an append's counters, a new state, a
-- deletion) notifies channel aerie_sessions with the session's id, at
-- commit, so that a reader following sessions (the console's live
-- transcripts) wakes on it instead of polling.

CREATE FUNCTION aerie_notify_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aerie_sessions', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION aerie_notify_session();
