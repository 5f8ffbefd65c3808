package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
	"outrigger.dev/clients/go/kube/internal/fwk"
	"outrigger.dev/clients/go/outrigger"
)

const sharedKey = "Counter/seen"

type counted struct {
	N int `json:"n"`
}

func (c *counted) Clone() fwk.StateData { return &counted{N: c.N} }

// counter writes {"n": <pods on nodes>} at PreFilter and rejects nodes while n is below 5.
type counter struct{}

func (counter) Name() string { return "Counter" }

func (counter) PreFilter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(sharedKey, &counted{N: len(nodes)})
	return nil, nil
}

func (counter) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func (counter) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(sharedKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if n := data.(*counted).N; n < 5 {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("n=%d", n))
	}
	return nil
}

func TestSharedKeysRideOnRepliesAndComeBackWithRequests(t *testing.T) {
	regs, err := Registrations(Config{Shared: []SharedState{JSONState[counted](sharedKey)}},
		WithPlugin("Counter", func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return counter{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if got := regs[0].StateKeys; len(got) != 1 || got[0] != sharedKey {
		t.Fatalf("declared keys %v", got)
	}
	inst, err := regs[0].Factory(json.RawMessage("{}"), &outrigger.Env{Profile: "p", Framework: func() *outrigger.Framework { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	p := inst.(*Plugin)
	m := outrigger.NewMirror(0)
	m.Apply(&pb.SnapshotDelta{Generation: 1, FullResync: true, Nodes: []*pb.NodeUpsert{
		{Id: 1, Node: &pb.Node{Metadata: &pb.ObjectMeta{Name: "a"}}}, {Id: 2, Node: &pb.Node{Metadata: &pb.ObjectMeta{Name: "b"}}}}})
	snap := m.Latest()
	call := func(entries ...*pb.StateEntry) *outrigger.Call {
		ctx := &pb.CycleContext{CycleId: "c1", Plugin: "Counter", Profile: "p", State: entries}
		return &outrigger.Call{Context: context.Background(), CycleID: "c1", State: outrigger.NewCycleState(ctx, nil), Snapshot: snap}
	}
	// PreFilter's write rides on its reply.
	pre := call()
	if _, st := p.PreFilter(pre, &pb.Pod{}); st != nil {
		t.Fatal(st)
	}
	if w := pre.State.Pending(); len(w) != 1 || w[0].GetKey() != sharedKey || string(w[0].GetValue()) != `{"n":2}` ||
		w[0].GetContentType() != "application/json" {
		t.Fatalf("PreFilter's reply carries %v", w)
	}
	nodes := []outrigger.Node{{ID: 1, Name: "a", State: snap.Node(1)}}
	// Another plugin (any process, any language) changed it: Filter reads the framework's value.
	for _, c := range []struct {
		entry string
		want  string
	}{{`{"n":2}`, "Unschedulable: n=2"}, {`{"n":7}`, "Success"}} {
		filter := call(&pb.StateEntry{Key: sharedKey, ContentType: "application/json", Value: []byte(c.entry)})
		if got := p.Filter(filter, &pb.Pod{}, nodes)[0].String(); got != c.want {
			t.Errorf("with %s: %s, want %s", c.entry, got, c.want)
		}
		// What came in is not sent back.
		if w := filter.State.Pending(); len(w) != 0 {
			t.Errorf("with %s: the reply carries %v", c.entry, w)
		}
	}
}
