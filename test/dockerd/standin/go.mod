module agentrl.dev/dockerd-standin

go 1.22
