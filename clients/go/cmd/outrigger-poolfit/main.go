// Command outrigger-poolfit serves PoolFit, an example of a plugin that signs pods (opportunistic
// batching), from a Go plugin host: the same plugin as clients/node/plugins/poolfit.js and
// tests/sign_plugins.py.
//
//	outrigger-poolfit --listen 127.0.0.1:0
package main

import (
	"encoding/json"
	"flag"
	"os"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// Unsignable is the pod annotation that asks for the pod not to be batched.
const Unsignable = "example.outrigger.io/unsignable"

// PoolFit keeps a pod on the nodes whose "pool" label is the pod's, and signs the pod with that label
// (all its Filter reads of the pod), so pods of one pool batch.
type PoolFit struct{}

// Name is the plugin's name.
func (PoolFit) Name() string { return "PoolFit" }

// Filter rejects the nodes of another pool (UnschedulableAndUnresolvable).
func (PoolFit) Filter(_ *outrigger.Call, pod *pb.Pod, nodes []outrigger.Node) []*outrigger.Status {
	pool := pod.GetMetadata().GetLabels()["pool"]
	out := make([]*outrigger.Status, len(nodes))
	for i, n := range nodes {
		if n.State == nil || n.State.Node.GetMetadata().GetLabels()["pool"] != pool {
			out[i] = outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable, "node(s) are in another pool")
		}
	}
	return out
}

// SignPod is the pod's pool, or Unschedulable (cannot sign) for a pod annotated Unsignable.
func (PoolFit) SignPod(_ *outrigger.Call, pod *pb.Pod) ([]outrigger.SignFragment, *outrigger.Status) {
	if pod.GetMetadata().GetAnnotations()[Unsignable] != "" {
		return nil, outrigger.NewStatus(outrigger.Unschedulable, "the pod asks not to be batched")
	}
	return []outrigger.SignFragment{{Key: "v1.Pod.Labels[pool]", Value: pod.GetMetadata().GetLabels()["pool"]}}, nil
}

func main() {
	fs := flag.NewFlagSet("outrigger-poolfit", flag.ContinueOnError)
	os.Exit(outrigger.Main("outrigger go plugin host", fs, os.Args[1:], func() ([]outrigger.Registration, error) {
		return []outrigger.Registration{{
			Name: "PoolFit", NeedsSnapshot: true, NodesOnly: true,
			Factory: func(json.RawMessage, *outrigger.Env) (outrigger.Plugin, error) { return PoolFit{}, nil },
		}}, nil
	}))
}
