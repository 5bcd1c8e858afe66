package sandbox

import "os"

// initArg0 is the argv[0] the supervisor gives the re-executed binary to make it the
// sandbox init instead of the CLI.
const initArg0 = "corral-init"

// IsInit reports whether this process was started as a sandbox init.
func IsInit() bool { return len(os.Args) > 0 && os.Args[0] == initArg0 }

// InitMain runs the sandbox init; it never returns.
func InitMain() { os.Exit(127) }
