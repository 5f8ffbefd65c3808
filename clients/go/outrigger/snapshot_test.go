package outrigger

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

func node(name string, labels map[string]string) *pb.Node {
	return &pb.Node{Metadata: &pb.ObjectMeta{Name: name, Labels: labels},
		Status: &pb.NodeStatus{Allocatable: map[string]int64{"cpu": 4000}}}
}

func placement(uid string, id uint32, nodeName string) *pb.PodPlacement {
	return &pb.PodPlacement{Ref: &pb.PodRef{Uid: uid, Namespace: "default", Name: uid}, NodeId: id, NodeName: nodeName}
}

// layout is a snapshot as "node: pod uids" per node name.
func layout(s *Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, n := range s.Nodes() {
		uids := []string{}
		for _, p := range n.Pods {
			uids = append(uids, p.GetRef().GetUid())
		}
		out[n.Name()] = uids
	}
	return out
}

func TestMirrorAppliesDeltasInTheContractsOrder(t *testing.T) {
	deltas := []*pb.SnapshotDelta{
		{Generation: 3, FullResync: true, NodeGeneration: 2,
			Nodes:     []*pb.NodeUpsert{{Id: 1, Node: node("a", nil)}, {Id: 2, Node: node("b", nil)}},
			PodsAdded: []*pb.PodPlacement{placement("p1", 1, "a")}},
		// p1 moves to b (removed and added in one delta), p2 arrives, a node c appears.
		{Generation: 4, NodeGeneration: 4, Nodes: []*pb.NodeUpsert{{Id: 3, Node: node("c", nil)}},
			PodsRemoved: []*pb.PodRef{{Uid: "p1"}},
			PodsAdded:   []*pb.PodPlacement{placement("p1", 2, "b"), placement("p2", 1, "a")}},
		{Generation: 4}, // a replay: ignored
		// b goes with its pods; a's labels change (its pods stay).
		{Generation: 6, NodeGeneration: 6, Nodes: []*pb.NodeUpsert{{Id: 1, Node: node("a", map[string]string{"x": "y"})}},
			RemovedNodeIds: []uint32{2}},
		// A pod placed on an unknown node is left out (and logged).
		{Generation: 7, PodsAdded: []*pb.PodPlacement{placement("p3", 9, "ghost")}},
	}
	want := []struct {
		generation, nodeGeneration uint64
		layout                     map[string][]string
	}{
		{3, 2, map[string][]string{"a": {"p1"}, "b": {}}},
		{4, 4, map[string][]string{"a": {"p2"}, "b": {"p1"}, "c": {}}},
		{4, 4, map[string][]string{"a": {"p2"}, "b": {"p1"}, "c": {}}},
		{6, 6, map[string][]string{"a": {"p2"}, "c": {}}},
		{7, 6, map[string][]string{"a": {"p2"}, "c": {}}},
	}
	m := NewMirror(2)
	var kept []*Snapshot
	for i, d := range deltas {
		m.Apply(d)
		s := m.Latest()
		kept = append(kept, s)
		if s.Generation != want[i].generation || s.NodeGeneration != want[i].nodeGeneration {
			t.Errorf("delta %d: generation %d/%d, want %d/%d", i, s.Generation, s.NodeGeneration, want[i].generation, want[i].nodeGeneration)
		}
		if got := layout(s); !reflect.DeepEqual(got, want[i].layout) {
			t.Errorf("delta %d: layout %v, want %v", i, got, want[i].layout)
		}
	}
	// Snapshots are immutable: the first one still shows its own generation's cluster.
	if got := layout(kept[0]); !reflect.DeepEqual(got, want[0].layout) {
		t.Errorf("generation 3 changed after later deltas: %v", got)
	}
	if got := kept[3].NodeByName("a").Node.GetMetadata().GetLabels()["x"]; got != "y" {
		t.Errorf("label x of a at generation 6 = %q", got)
	}
	// Two superseded generations are kept besides the latest: 3 is gone, 4 is held.
	if m.At(3) != nil || m.At(4) == nil || m.At(0) != m.Latest() {
		t.Errorf("kept generations: 3 held %v, 4 held %v", m.At(3) != nil, m.At(4) != nil)
	}
	if m.Resyncs != 1 || m.Deltas != 4 {
		t.Errorf("resyncs %d deltas %d, want 1 and 4", m.Resyncs, m.Deltas)
	}
}

func TestWaitForSaysWhichGenerationWasNotReached(t *testing.T) {
	m := NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 5, FullResync: true})
	if _, err := m.WaitFor(context.Background(), 5, time.Millisecond); err != nil {
		t.Fatalf("generation 5 is held: %v", err)
	}
	_, err := m.WaitFor(context.Background(), 9, 20*time.Millisecond)
	want := "snapshot generation 9 not reached within 20ms (the mirror is at generation 5)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		m.Apply(&pb.SnapshotDelta{Generation: 9})
	}()
	if s, err := m.WaitFor(context.Background(), 9, 5*time.Second); err != nil || s.Generation != 9 {
		t.Fatalf("waiting for generation 9: %v", err)
	}
}

func TestWithViewAppliesTheViewOnTopOfTheSnapshot(t *testing.T) {
	m := NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 1, FullResync: true,
		Nodes:     []*pb.NodeUpsert{{Id: 1, Node: node("a", map[string]string{"tier": "gold", "old": "x"})}, {Id: 2, Node: node("b", nil)}},
		PodsAdded: []*pb.PodPlacement{placement("victim", 1, "a"), placement("stays", 1, "a")}})
	base := m.Latest()
	view := &pb.NodeView{
		RemovedPods: []*pb.RemovedPod{{Uid: "victim", NodeName: "a"}},
		AddedNodes:  []*pb.AddedNode{{Id: 7, Node: node("what-if", nil)}},
		AddedPods: []*pb.Pod{{Metadata: &pb.ObjectMeta{Name: "new", Namespace: "default", Uid: "new"},
			Spec: &pb.PodSpec{NodeName: "what-if"}}},
		Changes: []*pb.NodeChange{{NodeName: "a", Allocatable: map[string]int64{"cpu": -1000}, Requested: map[string]int64{"cpu": 500},
			Labels: map[string]string{"tier": "silver"}, RemoveLabels: []string{"old"}}},
	}
	v := base.WithView(view)
	if got, want := layout(v), map[string][]string{"a": {"stays"}, "b": {}, "what-if": {"new"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("view layout %v, want %v", got, want)
	}
	a := v.NodeByName("a")
	if got := a.Node.GetStatus().GetAllocatable()["cpu"]; got != 3000 {
		t.Errorf("a's cpu in the view = %d, want 3000", got)
	}
	if got := a.Node.GetMetadata().GetLabels(); !reflect.DeepEqual(got, map[string]string{"tier": "silver"}) {
		t.Errorf("a's labels in the view = %v", got)
	}
	if got := a.RequestedDelta; !reflect.DeepEqual(got, map[string]int64{"cpu": 500}) {
		t.Errorf("a's requested delta = %v", got)
	}
	if v.Node(7) == nil || v.Node(7).Name() != "what-if" {
		t.Errorf("the added node is not id 7")
	}
	// The snapshot under the view is untouched.
	if got := layout(base); !reflect.DeepEqual(got, map[string][]string{"a": {"victim", "stays"}, "b": {}}) {
		t.Errorf("base layout changed: %v", got)
	}
	if base.NodeByName("a").Node.GetStatus().GetAllocatable()["cpu"] != 4000 || base.NodeByName("a").Node.GetMetadata().GetLabels()["tier"] != "gold" {
		t.Errorf("base node a changed")
	}
	if base.WithView(nil) != base {
		t.Errorf("a nil view is not the snapshot itself")
	}
}

func TestStatusRoundTripsAndNamesUnknownCodes(t *testing.T) {
	cases := []struct {
		in   *pb.Status
		want *Status
	}{
		{nil, nil},
		{&pb.Status{Code: pb.Code_CODE_UNSCHEDULABLE, Reasons: []string{"Insufficient cpu"}}, NewStatus(Unschedulable, "Insufficient cpu")},
		{&pb.Status{Code: 42, Reasons: []string{"x"}}, NewStatus(Error, "x", "unknown status code 42")},
	}
	for _, c := range cases {
		if got := StatusFromProto(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("StatusFromProto(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := NewStatus(UnschedulableAndUnresolvable, "a", "b").String(); got != "UnschedulableAndUnresolvable: a, b" {
		t.Errorf("String() = %q", got)
	}
	var ok *Status
	if !ok.IsSuccess() || ok.ToProto().GetCode() != Success {
		t.Errorf("a nil status is not success")
	}
}

type reserver struct{ got chan *Snapshot }

func (reserver) Name() string { return "R" }
func (r reserver) Reserve(c *Call, _ *pb.Pod, _ string) *Status {
	r.got <- c.Snapshot
	return nil
}
func (reserver) Unreserve(*Call, *pb.Pod, string) {}

func TestBindingCyclePointsFallBackToTheLatestGeneration(t *testing.T) {
	r := reserver{got: make(chan *Snapshot, 1)}
	h, err := NewHost([]Registration{{Name: "R", NeedsSnapshot: true,
		Factory: func(json.RawMessage, *Env) (Plugin, error) { return r, nil }}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Configure(context.Background(), &pb.ConfigureRequest{Plugin: "R", Profile: "p"}); err != nil {
		t.Fatal(err)
	}
	h.mirror = NewMirror(1)
	for g := uint64(1); g <= 5; g++ {
		h.mirror.Apply(&pb.SnapshotDelta{Generation: g, FullResync: g == 1})
	}
	// Generation 2 is long gone (one superseded generation is kept): Reserve reads generation 5.
	reply, err := h.Reserve(context.Background(), &pb.NodeRequest{NodeName: "a",
		Ctx: &pb.CycleContext{CycleId: "c", Plugin: "R", Profile: "p", SnapshotGeneration: 2}})
	if err != nil || reply.GetStatus().GetCode() != Success {
		t.Fatalf("Reserve: %v %v", reply, err)
	}
	if got := (<-r.got).Generation; got != 5 {
		t.Errorf("Reserve read generation %d, want 5", got)
	}
}
