-- 0002: the inbox's decisions, and the indexes the TUI's readers poll on.

CREATE TABLE approvals (
	id       INTEGER PRIMARY KEY,
	publish  INTEGER NOT NULL REFERENCES publishes (id),
	decision TEXT    NOT NULL,
	reason   TEXT    NOT NULL,
	time     INTEGER
);

-- Usage(session, since) and LatestUsage read one session's samples by time.
CREATE INDEX usage_session_time ON usage (session, time);

-- A task's attempts.
CREATE INDEX sessions_task ON sessions (task);

-- Leases(active=true) and "who holds port P" only look at held leases.
CREATE INDEX leases_held ON leases (session) WHERE ended IS NULL;
