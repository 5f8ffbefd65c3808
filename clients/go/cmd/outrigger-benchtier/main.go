// Command outrigger-benchtier serves BenchTier (framework/bench.py's Filter+Score plugin) from a Go
// plugin host: the `remote-go` benchmark scenario compares it with the same logic in the Python host.
//
//	outrigger-benchtier --listen 127.0.0.1:0
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/outrigger"
)

// TierLabel is the node label BenchTier reads unless its `label` arg names another.
const TierLabel = "bench.outrigger.dev/tier"

var tierScores = map[string]int64{"gold": 100, "silver": 50, "bronze": 0}

// BenchTier keeps pods off nodes without the tier label and prefers gold over silver over bronze.
type BenchTier struct {
	label  string
	reason string
}

// New builds BenchTier from its args ({"label": "..."}; anything else is refused).
func New(args json.RawMessage, _ *outrigger.Env) (outrigger.Plugin, error) {
	var a struct {
		Label *string `json:"label"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("BenchTier args: %v (known: label)", err)
	}
	label := TierLabel
	if a.Label != nil {
		label = *a.Label
	}
	return &BenchTier{label: label, reason: "node(s) didn't have label " + label}, nil
}

// Name is the plugin's name.
func (*BenchTier) Name() string { return "BenchTier" }

// Filter rejects the nodes without the label (UnschedulableAndUnresolvable).
func (t *BenchTier) Filter(_ *outrigger.Call, _ *pb.Pod, nodes []outrigger.Node) []*outrigger.Status {
	out := make([]*outrigger.Status, len(nodes))
	var rejected *outrigger.Status
	for i, n := range nodes {
		if _, ok := n.State.Node.GetMetadata().GetLabels()[t.label]; !ok {
			if rejected == nil {
				rejected = outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable, t.reason)
			}
			out[i] = rejected
		}
	}
	return out
}

// Score is 100 for gold, 50 for silver, 0 otherwise.
func (t *BenchTier) Score(_ *outrigger.Call, _ *pb.Pod, nodes []outrigger.Node) ([]int64, error) {
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = tierScores[n.State.Node.GetMetadata().GetLabels()[t.label]]
	}
	return out, nil
}

func main() {
	os.Exit(outrigger.Main("outrigger go plugin host", nil, os.Args[1:], func() ([]outrigger.Registration, error) {
		return []outrigger.Registration{{
			Name: "BenchTier", Factory: New, FilterAndScore: true, NeedsSnapshot: true, NodesOnly: true,
		}}, nil
	}))
}
