// Package supervisor is corral's domain and orchestration layer: tasks, sessions,
// admission, the publish queue and events. It defines the interfaces that store/ and
// sandbox/ meet; the TUI only reads its state and calls its actions.
package supervisor
