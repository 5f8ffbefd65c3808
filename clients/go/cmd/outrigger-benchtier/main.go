// Command outrigger-benchtier serves BenchTier (tools/bench/plugins.py's Filter+Score plugin) from a Go
// plugin host: the `remote-go` benchmark scenario compares it with the same logic in the Python host.
//
//	outrigger-benchtier --listen 127.0.0.1:0 [--lookahead]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
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

// noLabel marks a node without the tier label in a tiers table.
const noLabel = -1

type tiersKey string

// tiers is each node's score by node id (noLabel: no tier label), built once per node change: BenchTier
// reads node labels only, so the table is shared by every snapshot until a node changes.
func (t *BenchTier) tiers(s *outrigger.Snapshot) []int8 {
	return s.NodesMemo(tiersKey(t.label), func() any {
		out := make([]int8, s.MaxID())
		for _, n := range s.Nodes() {
			value, ok := n.Node.GetMetadata().GetLabels()[t.label]
			out[n.ID] = noLabel
			if ok {
				out[n.ID] = int8(tierScores[value])
			}
		}
		return out
	}).([]int8)
}

// Filter rejects the nodes without the label (UnschedulableAndUnresolvable).
func (t *BenchTier) Filter(c *outrigger.Call, _ *pb.Pod, nodes []outrigger.Node) []*outrigger.Status {
	tiers := t.tiers(c.Snapshot)
	out := make([]*outrigger.Status, len(nodes))
	rejected := outrigger.NewStatus(outrigger.UnschedulableAndUnresolvable, t.reason)
	for i, n := range nodes {
		if tiers[n.ID] == noLabel {
			out[i] = rejected
		}
	}
	return out
}

// Score is 100 for gold, 50 for silver, 0 otherwise.
func (t *BenchTier) Score(c *outrigger.Call, _ *pb.Pod, nodes []outrigger.Node) ([]int64, error) {
	tiers := t.tiers(c.Snapshot)
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = max(int64(tiers[n.ID]), 0)
	}
	return out, nil
}

func main() {
	fs := flag.NewFlagSet("outrigger-benchtier", flag.ContinueOnError)
	ahead := fs.Bool("lookahead", false, "declare lookahead: the framework asks for answers ahead of the pods' cycles")
	os.Exit(outrigger.Main("outrigger go plugin host", fs, os.Args[1:], func() ([]outrigger.Registration, error) {
		return []outrigger.Registration{{
			Name: "BenchTier", Factory: New, FilterAndScore: true, NeedsSnapshot: true, NodesOnly: true, Lookahead: *ahead,
		}}, nil
	}))
}
