-- PostgreSQL only (SQLite has no counterpart: one server per database file there, and its in-memory event
-- hub is the whole story). The StreamEvents of every run, so that an SSE client connected to any process sees
-- the runs of every process, and resumes with Last-Event-ID on any of them (nexus/server/_event_relay.py,
-- docs/scaling.md). Ids are handed out under an advisory transaction lock, so they commit in order: a reader
-- that saw id N has seen every id below it. A bounded log: trimmed by age and count, always a prefix of ids,
-- and run_events_floor says up to which id it was trimmed.
CREATE TABLE run_events (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session_label TEXT COLLATE "C" NOT NULL,
  event_type TEXT NOT NULL,
  payload TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX run_events_session ON run_events(session_label, id);
CREATE TABLE run_events_floor (
  one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
  trimmed_to BIGINT NOT NULL
);
INSERT INTO run_events_floor (one, trimmed_to) VALUES (TRUE, 0);
