module github.com/ironic-go/ironic-agent

go 1.26
