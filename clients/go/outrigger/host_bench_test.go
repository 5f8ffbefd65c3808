package outrigger

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

type tier struct{}

func (tier) Name() string { return "T" }
func table(s *Snapshot) []int8 {
	return s.NodesMemo("t", func() any {
		out := make([]int8, s.MaxID())
		for _, n := range s.Nodes() {
			v, ok := n.Node.GetMetadata().GetLabels()["t"]
			out[n.ID] = -1
			if ok && v == "gold" {
				out[n.ID] = 100
			} else if ok {
				out[n.ID] = 0
			}
		}
		return out
	}).([]int8)
}

func (tier) Filter(c *Call, _ *pb.Pod, nodes []Node) []*Status {
	t := table(c.Snapshot)
	out := make([]*Status, len(nodes))
	st := NewStatus(UnschedulableAndUnresolvable, "x")
	for i, n := range nodes {
		if t[n.ID] < 0 {
			out[i] = st
		}
	}
	return out
}
func (tier) Score(c *Call, _ *pb.Pod, nodes []Node) ([]int64, error) {
	t := table(c.Snapshot)
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = max(int64(t[n.ID]), 0)
	}
	return out, nil
}

// BenchmarkFilterBatch5000 is the host answering one Filter exchange with scores over 5000 nodes
// (go test -bench FilterBatch5000 ./outrigger): what a Go plugin host adds to the plugin's own work.
func BenchmarkFilterBatch5000(b *testing.B) {
	h, err := NewHost([]Registration{{Name: "T", Factory: func(json.RawMessage, *Env) (Plugin, error) { return tier{}, nil },
		FilterAndScore: true, NeedsSnapshot: true, NodesOnly: true}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "T", Profile: "p"}); err != nil {
		b.Fatal(err)
	}
	d := &pb.SnapshotDelta{Generation: 1, FullResync: true, NodeGeneration: 1}
	ids := make([]uint32, 5000)
	for i := range ids {
		ids[i] = uint32(i + 1)
		labels := map[string]string{"t": "gold", "kubernetes.io/hostname": fmt.Sprint(i)}
		if i%10 == 9 {
			delete(labels, "t")
		}
		d.Nodes = append(d.Nodes, &pb.NodeUpsert{Id: ids[i], Node: node(fmt.Sprintf("n%05d", i), labels)})
	}
	h.mirror.Apply(d)
	ctx := &pb.CycleContext{CycleId: "c", Plugin: "T", Profile: "p", SnapshotGeneration: 1, NodeGeneration: 1, Pod: &pb.Pod{}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cyc, _ := h.openCycle(ctx, true)
		r := h.filterBatch(context.Background(), cyc, &pb.NodeBatch{SnapshotGeneration: 1, NodeIds: ids})
		if len(r.Codes) != 5000 {
			b.Fatal(r)
		}
	}
}

// BenchmarkLookahead64Pods5000Nodes is one Lookahead request: 64 pods, Filter and Score over 5000 nodes.
func BenchmarkLookahead64Pods5000Nodes(b *testing.B) {
	h, err := NewHost([]Registration{{Name: "T", Factory: func(json.RawMessage, *Env) (Plugin, error) { return tier{}, nil },
		FilterAndScore: true, Lookahead: true}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "T", Profile: "p"}); err != nil {
		b.Fatal(err)
	}
	d := &pb.SnapshotDelta{Generation: 1, FullResync: true, NodeGeneration: 1}
	for i := 0; i < 5000; i++ {
		labels := map[string]string{"t": "gold"}
		if i%10 == 9 {
			delete(labels, "t")
		}
		d.Nodes = append(d.Nodes, &pb.NodeUpsert{Id: uint32(i + 1), Node: node(fmt.Sprintf("n%05d", i), labels)})
	}
	h.mirror.Apply(d)
	pods := make([]*pb.Pod, 64)
	for i := range pods {
		pods[i] = &pb.Pod{Metadata: &pb.ObjectMeta{Uid: fmt.Sprint(i)}}
	}
	req := &pb.LookaheadRequest{Plugin: "T", Profile: "p", NodeGeneration: 1, Filter: true, Score: true, Pods: pods}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := h.lookahead(context.Background(), req); r.GetError() != nil {
			b.Fatal(r.GetError())
		}
	}
}
