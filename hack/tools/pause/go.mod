module github.com/stream-autoscaler/stream-autoscaler/hack/tools/pause

go 1.26.0
