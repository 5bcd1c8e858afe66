module corral

go 1.26.8

require (
	github.com/creack/pty v1.1.24
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/pelletier/go-toml/v2 v2.4.3
	github.com/vishvananda/netlink v1.3.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/stretchr/testify v1.8.4 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
)
