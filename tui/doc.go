// Package tui is the bubbletea program: a router model and one component per pane. It
// reads supervisor state and events and calls supervisor actions, nothing below that.
package tui
