// Package store is the SQLite implementation of the supervisor's store: typed records
// for fleets, tasks, sessions, leases, publishes and the event log, with embedded
// migrations.
//
// Open gives a *DB that implements supervisor.Store. Writes go through one goroutine
// that owns the only write connection and commits concurrent Updates together (group
// commit, each Update in its own savepoint); reads go through a pool of read-only
// connections, each View one snapshot. The database runs in WAL mode, so readers never
// wait for the writer.
//
// Storage conventions, shared by every table (see migrations/0001_init.sql): times are
// unix nanoseconds (NULL for the zero time) and come back in UTC; durations are
// nanoseconds; slices are JSON text. Migrations are numbered files under migrations/,
// each applied once in its own transaction and recorded in schema_migrations; a
// database newer than the binary is refused with ErrNewerSchema.
package store
