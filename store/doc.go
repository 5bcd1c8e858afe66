// Package store is the SQLite implementation of the supervisor's store: typed records
// for fleets, tasks, sessions, leases, publishes and the event log, with embedded
// migrations.
package store
