-- 0003: the inbox's agent items — a prompt noticed on a quiet terminal, a question
-- asked through `corral ctl ask`, a proposed handoff — and answers recorded by another
-- process (`corral answer`) for the running supervisor to deliver.

CREATE TABLE inbox (
	id      INTEGER PRIMARY KEY,
	kind    TEXT    NOT NULL, -- needs input, permission, done, rate-limited, handoff
	task    TEXT    NOT NULL,
	session TEXT    NOT NULL,
	text    TEXT    NOT NULL,
	screen  TEXT    NOT NULL, -- the agent's last screen, as plain text
	asked   INTEGER NOT NULL, -- 1: through ctl/MCP; 0: noticed on the terminal
	handoff TEXT    NOT NULL, -- the proposed task, for a handoff
	state   TEXT    NOT NULL, -- open, answered, dismissed, resolved
	answer  TEXT    NOT NULL,
	pending TEXT,             -- an answer recorded for the supervisor to deliver; NULL when none
	created INTEGER,
	closed  INTEGER
);

CREATE INDEX inbox_state ON inbox (state);
