module github.com/ironic-go/ironic-agent

go 1.26.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/mdlayher/ethtool v0.7.0
	github.com/mdlayher/packet v1.2.0
	github.com/ulikunitz/xz v0.5.17
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/sys v0.49.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.7.0 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
